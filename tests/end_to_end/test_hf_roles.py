"""Hugging Face files a training script uses as they are: roles, padding,
truncation, batches and a chat template, through ``transformers.AutoTokenizer``
(offline: ``HF_HUB_OFFLINE=1`` is set by ``tests/conftest.py``), with every
id compared to tiktoken's.
"""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest

import toktoktok
from tests.conftest import english_text, toktok
from tests.helpers import SHARED
from toktoktok.config import ConfigError, load_config
from toktoktok.hf import hf_roles, write_hf
from toktoktok.tiktoken_file import write_tiktoken
from toktoktok.vocab import Vocab

TEMPLATE = ("{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
            "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}")
SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|pad|>"]


# ---------------------------------------------------------------- roles by name and by config


@pytest.mark.parametrize(("tokens", "given", "expected"), [
    (["<|endoftext|>"], None, {"bos_token": "<|endoftext|>", "eos_token": "<|endoftext|>"}),
    (["<s>", "</s>", "<pad>", "<|endoftext|>"], None, {"bos_token": "<s>", "eos_token": "</s>", "pad_token": "<pad>"}),
    (["<|bos|>", "<|endoftext|>", "<|pad|>"], None,
     {"bos_token": "<|bos|>", "eos_token": "<|endoftext|>", "pad_token": "<|pad|>"}),
    (["<|eos|>", "<|endoftext|>"], None, {"eos_token": "<|eos|>"}),
    (["<|im_start|>", "<|im_end|>"], None, {}),
    (["<|endoftext|>", "<|im_end|>"], {"eos_token": "<|im_end|>", "pad_token": "<|endoftext|>"},
     {"eos_token": "<|im_end|>", "pad_token": "<|endoftext|>"}),  # another eos given, no bos: none
    (["<|endoftext|>", "<|im_end|>"], {"eos_token": "<|im_end|>", "bos_token": "<|endoftext|>"},
     {"bos_token": "<|endoftext|>", "eos_token": "<|im_end|>"}),
    (["<|endoftext|>", "</s>"], {"eos_token": "<|endoftext|>"},
     {"bos_token": "<|endoftext|>", "eos_token": "<|endoftext|>"}),  # given as the eos: GPT-2's convention
    (["<|endoftext|>"], {"bos_token": None}, {"eos_token": "<|endoftext|>"}),
    (["<unk>", "x"], {"unk_token": "<unk>"}, {"unk_token": "<unk>"}),
])
def test_roles(tokens, given, expected):
    assert hf_roles(tokens, given) == expected


def test_write_hf_refuses_a_role_that_is_not_a_special_token(tmp_path):
    with pytest.raises(ValueError, match="pad_token"):
        write_hf(tmp_path, Vocab.initial(hardcoded=False).ranks(), {"<|a|>": 256}, r"\S+|\s+",
                 roles={"pad_token": "<|b|>"})


# ---------------------------------------------------------------- config


@pytest.fixture
def data(tmp_path: Path) -> Path:
    (tmp_path / "a").mkdir()
    text = english_text(20_000)
    chat = "".join(f"<|im_start|>user\n{p}<|im_end|>\n<|endoftext|>" for p in text.split("\n\n")[:40])
    (tmp_path / "a" / "text.txt").write_text(text + "\n\n" + chat, encoding="utf-8")
    return tmp_path


def config(folder: Path, top: str, specials: list[str] = SPECIALS) -> Path:
    path = folder / "config.yaml"
    path.write_text(textwrap.dedent(f"""\
        output: out/tok.tiktoken
        threads: 1
        heldout_share: 0
        special_tokens: {json.dumps(specials)}
        {{top}}
        phases:
          - {{{{name: A, merges: 200, sources: [{{{{path: {folder / 'a'}}}}}]}}}}
        """).format(top=top), encoding="utf-8")
    return path


@pytest.mark.parametrize(("top", "expected"), [
    ("hf: {pad_token: '<|padding|>'}", "line 5: hf.pad_token is '<|padding|>', not a declared special token"),
    ("hf: {bos_tokn: '<|endoftext|>'}", "line 5: hf.bos_tokn is not a known key (did you mean 'bos_token'?)"),
    ("hf: {eos_token: 3}", "hf.eos_token must be a special token (a string) or null, got 3"),
    ("hf: {model_max_length: 0}", "hf.model_max_length must be an integer >= 1 or null, got 0"),
    ("hf: {chat_template: ''}", "hf.chat_template must be a Jinja template"),
    ("hf: '<|pad|>'", "hf must be a mapping"),
    ("export_hf: false\nhf: {pad_token: '<|pad|>'}", "line 5: export_hf is false, but hf: is given"),
])
def test_hf_config_errors(data, top, expected):
    path = config(data, top)
    with pytest.raises(ConfigError) as info:
        load_config(path)
    assert expected in str(info.value)
    r = toktok("run", "-c", path)
    assert r.code == 2 and expected in r.err


def test_hf_implies_export_hf(data):
    cfg = load_config(config(data, "hf: {model_max_length: 64}"))
    assert cfg.export_hf is True and cfg.hf.model_max_length == 64 and cfg.hf.roles == {}
    assert load_config(config(data, "")).export_hf is False


def test_a_role_may_name_a_warm_start_special_token(data):
    base = data / "base.tiktoken"
    write_tiktoken(base, {bytes([b]): b for b in range(256)})
    (data / "base.meta.json").unlink(missing_ok=True)
    top = f"warm_start: {{file: {base}, special_tokens: {{'<|base_eos|>': 256}}}}\nhf: {{eos_token: '<|base_eos|>'}}"
    path = config(data, top, ["<|pad|>"])
    load_config(path)
    assert toktok("plan", "-c", path).code == 0
    bad = config(data, top.replace("eos_token: '<|base_eos|>'", "eos_token: '<|nope|>'"), ["<|pad|>"])
    load_config(bad)  # the base's own special tokens are known once it is read
    r = toktok("plan", "-c", bad)
    assert r.code == 2 and "line 6: hf.eos_token is '<|nope|>', not a declared special token" in r.err


CL100K = SHARED / "data/reference/cl100k_base.tiktoken.gz"


@pytest.mark.skipif(not CL100K.exists(), reason="needs ../shared")
def test_an_eos_given_without_a_bos_makes_no_bos(data):
    """Warm start cl100k_base, ``hf: {pad_token: <|fim_prefix|>, eos_token: <|endofprompt|>}``:
    ``<|endoftext|>`` is no longer the eos, so it is not the bos either (docs/outputs.md)."""
    top = (f"warm_start: {{file: {CL100K}}}\npattern: cl100k\n"
           "hf: {pad_token: '<|fim_prefix|>', eos_token: '<|endofprompt|>'}")
    path = config(data, top, [])
    path.write_text(path.read_text().replace("merges: 200", "merges: 5"))
    r = toktok("run", "-c", path)
    assert r.code == 0, r.err
    line = next(line for line in r.out.splitlines() if "Hugging Face:" in line)
    assert "bos_token" not in line and "eos_token <|endofprompt|> (100276)" in line, line
    folder = data / "out" / "tok.hf"
    settings = json.loads((folder / "tokenizer_config.json").read_text())
    special_map = json.loads((folder / "special_tokens_map.json").read_text())
    for doc in (settings, special_map):
        assert "bos_token" not in doc
        assert (doc["eos_token"], doc["pad_token"]) == ("<|endofprompt|>", "<|fim_prefix|>")
        assert "<|endoftext|>" in doc["additional_special_tokens"]
    transformers = pytest.importorskip("transformers")
    tok = transformers.PreTrainedTokenizerFast.from_pretrained(str(folder))
    assert (tok.bos_token, tok.bos_token_id) == (None, None)
    assert (tok.eos_token_id, tok.pad_token_id) == (100276, 100258)
    assert tok("<|endoftext|>hi")["input_ids"][0] == 100257  # still a special token, one id


# ---------------------------------------------------------------- transformers


@pytest.fixture
def exported(data):
    """A run with ``hf:``: ChatML roles, a pad token, a length and a chat template."""
    top = "hf: " + json.dumps({"bos_token": "<|endoftext|>", "eos_token": "<|im_end|>", "model_max_length": 16,
                               "chat_template": TEMPLATE})
    path = config(data, top)
    r = toktok("run", "-c", path)
    assert r.code == 0, r.err
    return {"config": path, "out": r.out, "hf": data / "out" / "tok.hf",
            "enc": toktoktok.load(data / "out" / "tok.tiktoken")}


def test_the_summary_says_which_token_got_which_role(exported):
    enc = exported["enc"]
    ids = {t: enc.encode_single_token(t) for t in SPECIALS}
    line = next(line for line in exported["out"].splitlines() if "Hugging Face:" in line)
    assert f"bos_token <|endoftext|> ({ids['<|endoftext|>']})" in line
    assert f"eos_token <|im_end|> ({ids['<|im_end|>']})" in line
    assert f"pad_token <|pad|> ({ids['<|pad|>']})" in line
    assert "chat template" in line
    settings = json.loads((exported["hf"] / "tokenizer_config.json").read_text())
    assert (settings["bos_token"], settings["eos_token"], settings["pad_token"]) == (
        "<|endoftext|>", "<|im_end|>", "<|pad|>")
    assert settings["chat_template"] == TEMPLATE and settings["model_max_length"] == 16


def test_autotokenizer_pads_truncates_and_batches(exported):
    transformers = pytest.importorskip("transformers")
    tok = transformers.AutoTokenizer.from_pretrained(str(exported["hf"]))
    enc = exported["enc"]
    pad = enc.encode_single_token("<|pad|>")
    assert (tok.pad_token_id, tok.eos_token_id, tok.bos_token_id) == (
        pad, enc.encode_single_token("<|im_end|>"), enc.encode_single_token("<|endoftext|>"))
    texts = ["To be, or not to be", "Hi", "<|im_start|>user\nWhat is the question?<|im_end|>"]
    batch = tok(texts, padding=True)
    longest = max(len(enc.encode(t, allowed_special="all")) for t in texts)
    for text, ids, mask in zip(texts, batch["input_ids"], batch["attention_mask"]):
        mine = enc.encode(text, allowed_special="all")
        assert len(ids) == longest
        assert ids == mine + [pad] * (longest - len(mine))  # padding on the right, with the pad id
        assert mask == [1] * len(mine) + [0] * (longest - len(mine))
    long_text = english_text(2_000)
    truncated = tok(long_text, truncation=True)["input_ids"]
    assert truncated == enc.encode(long_text)[:16]  # model_max_length
    fixed = tok(texts, padding="max_length", truncation=True, max_length=8, return_tensors="np")
    assert fixed["input_ids"].shape == (3, 8)
    assert fixed["input_ids"][1].tolist() == enc.encode("Hi") + [pad] * (8 - len(enc.encode("Hi")))
    assert tok.decode(batch["input_ids"][2], skip_special_tokens=False).startswith(texts[2])


def test_autotokenizer_applies_the_chat_template(exported):
    transformers = pytest.importorskip("transformers")
    tok = transformers.AutoTokenizer.from_pretrained(str(exported["hf"]))
    messages = [{"role": "user", "content": "Who's there?"}, {"role": "assistant", "content": "Nay, answer me."}]
    text = tok.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    assert text == ("<|im_start|>user\nWho's there?<|im_end|>\n<|im_start|>assistant\nNay, answer me.<|im_end|>\n"
                    "<|im_start|>assistant\n")
    ids = tok.apply_chat_template(messages, tokenize=True, add_generation_prompt=True)
    ids = ids["input_ids"] if not isinstance(ids, list) else ids  # transformers 5 returns a BatchEncoding
    assert ids == exported["enc"].encode(text, allowed_special="all")


def test_no_pad_token_is_said_and_no_chat_template_unless_given(data):
    path = config(data, "export_hf: true", ["<|endoftext|>"])
    r = toktok("run", "-c", path)
    assert r.code == 0, r.err
    assert "no pad_token: padding=True fails" in r.out
    settings = json.loads((data / "out" / "tok.hf" / "tokenizer_config.json").read_text())
    assert "chat_template" not in settings and "pad_token" not in settings
    assert settings["bos_token"] == settings["eos_token"] == "<|endoftext|>"


# ---------------------------------------------------------------- NAME.hf/ is a member of the output set


def test_an_export_without_hf_removes_the_stale_hf_folder(data):
    path = config(data, "hf: {pad_token: '<|pad|>'}")
    assert toktok("run", "-c", path).code == 0
    folder = data / "out" / "tok.hf"
    assert (folder / "tokenizer.json").is_file()
    path.write_text(path.read_text().replace("hf: {pad_token: '<|pad|>'}", "").replace("merges: 200", "merges: 150"))
    r = toktok("run", "-c", path)
    assert r.code == 0, r.err
    assert not folder.exists()
    for name in ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json"):
        assert f"removed {folder / name}: left by an earlier export, it does not match this one" in r.err
    assert toktoktok.load(data / "out" / "tok.tiktoken").n_vocab == 256 + 1161 + 150 + len(SPECIALS)


def test_a_folder_with_files_of_the_users_keeps_them(data):
    path = config(data, "export_hf: true")
    assert toktok("run", "-c", path).code == 0
    folder = data / "out" / "tok.hf"
    (folder / "README.md").write_text("my notes")
    path.write_text(path.read_text().replace("export_hf: true", ""))
    assert toktok("run", "-c", path).code == 0
    assert sorted(p.name for p in folder.iterdir()) == ["README.md"]

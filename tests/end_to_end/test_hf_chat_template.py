"""``hf.chat_template`` is compiled when the config is read, as transformers compiles it
for ``apply_chat_template``: a template Jinja refuses is a config error (exit 2, one
line naming the key, the config's line and the template's), whichever of transformers,
jinja2 or neither is installed (the last warns that it was not checked).

Where transformers or jinja2 is missing is made by a shim on ``PYTHONPATH`` whose
import fails, in a ``toktok`` subprocess.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests.conftest import toktok
from tests.processes import TOKTOK, error_line
from toktoktok.chat_template import check_chat_template
from toktoktok.config import ConfigError, load_config
from toktoktok.hf import write_hf
from toktoktok.vocab import Vocab

UNCLOSED_TAG = "{% for m in messages %}{{ m['content'] "
UNCLOSED_BLOCK = "{% for m in messages %}\n{{ m['content'] }}\n"
UNKNOWN_FILTER = "{% for m in messages %}{{ m['content'] | shout }}{% endfor %}"
# what transformers' environment has beyond plain Jinja: loop controls, the generation tag, its globals
VALID = ("{% for m in messages %}{% if loop.index > 8 %}{% break %}{% endif %}"
         "{% if m['role'] == 'assistant' %}{% generation %}{{ m['content'] | tojson }}{% endgeneration %}"
         "{% else %}{{ m['content'] | trim }}{% endif %}{% endfor %}"
         "{% if not messages %}{{ raise_exception('no messages') }}{% endif %}")


def config(folder: Path, template: str) -> Path:
    (folder / "a").mkdir(exist_ok=True)
    (folder / "a" / "text.txt").write_text("hello world, hello there\n", encoding="utf-8")
    path = folder / "config.yaml"
    path.write_text(textwrap.dedent(f"""\
        output: out/tok.tiktoken
        heldout_share: 0
        special_tokens: ["<|endoftext|>"]
        hf:
          chat_template: {json.dumps(template)}
        phases:
          - {{name: A, merges: 5, sources: [{{path: {folder / 'a'}}}]}}
        """), encoding="utf-8")
    return path


@pytest.mark.parametrize(("template", "jinja_says"), [
    (UNCLOSED_TAG, "line 1 of the template: unexpected end of template, expected 'end of print statement'."),
    (UNCLOSED_BLOCK, "of the template: Unexpected end of template. Jinja was looking for the following tags: "
                     "'endfor' or 'else'."),
    (UNKNOWN_FILTER, "line 1 of the template: No filter named 'shout'."),
])
def test_a_template_jinja_refuses_is_a_config_error(tmp_path, template, jinja_says):
    path = config(tmp_path, template)
    expected = "line 5: hf.chat_template is not a valid Jinja template (as transformers compiles it): "
    with pytest.raises(ConfigError) as info:
        load_config(path)
    assert expected in str(info.value) and jinja_says in str(info.value)
    r = toktok("run", "-c", path)
    assert r.code == 2
    (line,) = r.err.strip().splitlines()
    assert line.startswith(f"error: {path} line 5: hf.chat_template") and jinja_says in line
    assert not (tmp_path / "out").exists()  # refused before any work


def test_transformers_refuses_what_the_config_refuses(tmp_path):
    """The config's check agrees with transformers' ``apply_chat_template``, when it is installed."""
    transformers = pytest.importorskip("transformers")
    import jinja2

    write_hf(tmp_path, Vocab.initial(hardcoded=False).ranks(), {"<|a|>": 256}, r"\S+|\s+")
    tok = transformers.PreTrainedTokenizerFast.from_pretrained(str(tmp_path))
    messages = [{"role": "user", "content": "hi"}]
    for template in (UNCLOSED_TAG, UNCLOSED_BLOCK, UNKNOWN_FILTER):
        with pytest.raises(jinja2.TemplateSyntaxError):
            tok.apply_chat_template(messages, chat_template=template, tokenize=False)
    assert tok.apply_chat_template(messages, chat_template=VALID, tokenize=False) == "hi"


def test_a_valid_template_passes_and_is_exported(tmp_path):
    pytest.importorskip("jinja2")
    path = config(tmp_path, VALID)
    cfg = load_config(path)
    assert cfg.hf.chat_template == VALID and cfg.warnings == ()
    assert check_chat_template(VALID) in ("transformers", "jinja2")
    r = toktok("run", "-c", path)
    assert r.code == 0, r.err
    assert "chat_template" not in r.err
    settings = json.loads((tmp_path / "out" / "tok.hf" / "tokenizer_config.json").read_text())
    assert settings["chat_template"] == VALID


def test_write_hf_refuses_a_template_jinja_refuses(tmp_path):
    pytest.importorskip("jinja2")
    with pytest.raises(ValueError, match="chat_template is not a valid Jinja template: line 1 of the template"):
        write_hf(tmp_path, Vocab.initial(hardcoded=False).ranks(), {"<|a|>": 256}, r"\S+|\s+",
                 chat_template=UNCLOSED_TAG)
    assert not (tmp_path / "tokenizer_config.json").exists()


# ---------------------------------------------------------------- without transformers, without jinja2


def shimmed(tmp_path: Path, *modules: str) -> dict[str, str]:
    """An environment in which importing each of ``modules`` fails, as where it is not installed."""
    shim = tmp_path / "shim"
    for module in modules:
        (shim / module).mkdir(parents=True, exist_ok=True)
        (shim / module / "__init__.py").write_text(f"raise ImportError('No module named {module} (a test shim)')\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST")}
    env["PYTHONPATH"] = str(shim)
    return env


def checker(env: dict[str, str], template: str) -> str:
    """Which one checked ``template`` in ``env``: transformers, jinja2, None, or the refusal."""
    code = ("import sys\nfrom toktoktok.chat_template import check_chat_template\n"
            "try:\n    print(check_chat_template(sys.argv[1]))\nexcept ValueError as exc:\n    print('refused', exc)\n")
    proc = subprocess.run([sys.executable, "-c", code, template], capture_output=True, text=True, env=env,
                          timeout=120)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.strip()


def plan(env: dict[str, str], path: Path) -> subprocess.CompletedProcess:
    return subprocess.run([str(TOKTOK), "plan", "-c", str(path)], capture_output=True, text=True, env=env,
                          timeout=120)


def test_without_transformers_jinja2_checks_it_as_transformers_would(tmp_path):
    pytest.importorskip("jinja2")
    env = shimmed(tmp_path, "transformers")
    assert checker(env, VALID) == "jinja2"  # the generation tag and loop controls are known
    assert checker(env, UNKNOWN_FILTER) == "refused line 1 of the template: No filter named 'shout'."
    proc = plan(env, config(tmp_path, UNCLOSED_TAG))
    assert proc.returncode == 2
    line = error_line(proc.stderr)
    assert "line 5: hf.chat_template is not a valid Jinja template" in line
    assert "line 1 of the template: unexpected end of template" in line


@pytest.mark.parametrize("missing", [("transformers", "jinja2"), ("jinja2",)])
def test_without_jinja2_one_warning_says_it_was_not_checked(tmp_path, missing):
    env = shimmed(tmp_path, *missing)
    assert checker(env, UNCLOSED_TAG) == "None"
    proc = plan(env, config(tmp_path, UNCLOSED_TAG))
    assert proc.returncode == 0, proc.stderr
    warnings = [line for line in (proc.stdout + proc.stderr).splitlines() if "chat_template was" in line]
    assert warnings == ["warning: hf.chat_template was not checked as Jinja: jinja2 cannot be imported "
                        "(transformers needs it too, to apply the template: pip install jinja2)"]

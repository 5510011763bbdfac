"""A feature that goes fails a check. The codec plugins the engine registers
(codec/plugins/mod.rs) and the store modes it parses (store/open_mode.rs) are read from the
source and held to the tests that read through each plugin and open with each mode; then each
one in turn is deleted from the source text and the check must name exactly it. The file-size
guard gets the same treatment. Nothing is built here: what a deletion does to the engine's own
tests is shown by tests/support/mutate_engine.py, which builds."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest
from support.feature_tables import (
    OPEN_MODE,
    PLUGINS,
    ROOT,
    Registration,
    modes_in_rust_tests,
    registrations,
    store_modes,
    without_mode,
    without_registration,
)
from support.module_graph import CODE_LINES_AT_MOST, code_lines

# Each plugin, by its `create` function, and tests that read data through it: a Rust test
# (file::function), a tests/read/test_codec_matrix.py case (file::case id) or a Python test
# (file::function). Where zarrs has a codec of its own that would take over (bz2, pcodec,
# adler32, fletcher32, vlen-utf8), a test tells the two apart (tests/support/mutate_engine.py
# deletes each registration and shows a Rust test failing).
PLUGIN_READERS: dict[str, tuple[str, ...]] = {
    "lz4::create": (
        "codecs/tests/plugins.rs::numcodecs_lz4",
        "tests/read/test_codec_matrix.py::lz4",
    ),
    "delta::create": (
        "codecs/tests/plugins.rs::numcodecs_delta",
        "tests/read/test_codec_matrix.py::delta",
    ),
    "fixedscaleoffset::create": (
        "codecs/tests/plugins.rs::numcodecs_fixedscaleoffset",
        "tests/read/test_codec_matrix.py::fixedscaleoffset",
    ),
    "packbits::create": (
        "codecs/tests/plugins.rs::numcodecs_packbits",
        "tests/read/test_codec_matrix.py::packbits",
    ),
    "bz2::create": (
        "codecs/tests/plugins.rs::numcodecs_bz2_with_default_level",
        "tests/read/test_codec_matrix.py::bz2",
        "tests/read/test_read_api.py::test_a_bz2_chunk_that_inflates_past_its_size_is_a_decode_error",
    ),
    "pcodec::create": (
        "codecs/tests/plugins.rs::pcodec",
        "codecs/tests/plugins.rs::pcodec_file_longer_than_its_chunk_is_refused_by_the_bounded_decoder",
        "tests/read/test_codec_matrix.py::pcodec",
    ),
    "zfp::create_zfpy": (
        "codecs/tests/plugins.rs::zfpy_and_zfp",
        "codecs/tests/plugins.rs::v2_zfpy_by_numcodecs_id",
        "tests/read/test_codec_matrix.py::zfpy",
    ),
    "zfp::create_zfp": ("codecs/tests/plugins.rs::zfpy_and_zfp",),
    "checksum::create_adler32": (
        "codecs/tests/plugins.rs::adler32_and_fletcher32_are_checked_on_partial_reads",
        "codecs/tests/dtypes.rs::checksums_under_vlen_chunks_are_checked_on_partial_reads",
        "tests/read/test_codec_matrix.py::adler32",
    ),
    "checksum::create_fletcher32": (
        "codecs/tests/plugins.rs::adler32_and_fletcher32_are_checked_on_partial_reads",
        "codecs/tests/dtypes.rs::checksums_under_vlen_chunks_are_checked_on_partial_reads",
        "tests/read/test_codec_matrix.py::fletcher32",
    ),
    "checksum32::create_crc32": (
        "codecs/tests/plugins.rs::v2_checksums_astype_quantize_lzma_by_numcodecs_id",
        "tests/read/test_codec_matrix.py::crc32",
    ),
    "checksum32::create_crc32c": (
        "codecs/tests/plugins.rs::v2_checksums_astype_quantize_lzma_by_numcodecs_id",
        "tests/read/test_codec_matrix.py::numcodecs.crc32c",
    ),
    "checksum32::create_jenkins_lookup3": (
        "codecs/tests/plugins.rs::v2_checksums_astype_quantize_lzma_by_numcodecs_id",
        "tests/read/test_codec_matrix.py::jenkins_lookup3",
    ),
    "astype::create": (
        "codecs/tests/plugins.rs::v2_checksums_astype_quantize_lzma_by_numcodecs_id",
        "tests/read/test_codec_matrix.py::astype",
    ),
    "quantize::create": (
        "codecs/tests/plugins.rs::v2_checksums_astype_quantize_lzma_by_numcodecs_id",
        "tests/read/test_codec_matrix.py::quantize",
    ),
    "lzma::create": (
        "codecs/tests/plugins.rs::v2_checksums_astype_quantize_lzma_by_numcodecs_id",
        "tests/read/test_codec_matrix.py::lzma",
    ),
    "vlen::create_utf8": (
        "codecs/tests/dtypes.rs::variable_length_arrays_read_and_write_chunk_by_chunk",
        "tests/read/test_dtype_matrix.py::test_zarr_python_written_arrays_read_exactly",
    ),
    "vlen::create_bytes": (
        "codecs/tests/dtypes.rs::variable_length_arrays_read_and_write_chunk_by_chunk",
        "tests/read/test_dtype_matrix.py::test_zarr_python_written_arrays_read_exactly",
    ),
    "scale_offset::create": (
        "codecs/tests/plugins.rs::scale_offset_and_cast_value",
        "tests/read/test_codec_matrix.py::scale_offset",
    ),
    "cast_value::create": (
        "codecs/tests/plugins.rs::scale_offset_and_cast_value",
        "tests/read/test_codec_matrix.py::cast_value",
    ),
}

MODE_TESTS = ROOT / "tests" / "store" / "test_modes.py"


def plugin_problems(registered: list[Registration]) -> list[str]:
    """What the registrations and PLUGIN_READERS disagree on: a plugin no test reads, or one
    the tests read that the code no longer registers."""
    creates = {r.create for r in registered}
    untested = sorted(creates - PLUGIN_READERS.keys())
    gone = sorted(PLUGIN_READERS.keys() - creates)
    return [f"{c} is registered but no test reads through it" for c in untested] + [
        f"{c} is not registered, and {', '.join(PLUGIN_READERS[c])} read through it" for c in gone
    ]


def _python_modes() -> set[str]:
    """The `MODES` tests/store/test_modes.py opens stores with."""
    for node in ast.parse(MODE_TESTS.read_text()).body:
        if isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == "MODES" for t in node.targets
        ):
            return set(ast.literal_eval(node.value))
    raise AssertionError(f"{MODE_TESTS.name} has no MODES")


def mode_problems(source: str) -> list[str]:
    """What `Mode::parse` (in `source`) and the tests disagree on: a mode no test opens with,
    or one the tests open with that the code no longer parses."""
    parsed = set(store_modes(source))
    python, rust = _python_modes(), modes_in_rust_tests(source)
    untested = sorted(parsed - python - rust)
    gone = sorted((python | rust) - parsed)
    return [f"mode {m!r} is parsed but no test opens with it" for m in untested] + [
        f"mode {m!r} is not parsed, and "
        + " and ".join(
            where
            for where, modes in [
                ("tests/store/test_modes.py", python),
                ("open_mode.rs's tests", rust),
            ]
            if m in modes
        )
        + " open with it"
        for m in gone
    ]


def _codec_matrix_ids(path: Path) -> set[str]:
    """The ids of the `Case(...)` entries of tests/read/test_codec_matrix.py (first argument)."""
    return {
        node.args[0].value
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id == "Case"
        and node.args
        and isinstance(node.args[0], ast.Constant)
    }


def _reader_exists(reader: str) -> bool:
    file, name = reader.split("::")
    path = ROOT / file
    if not path.exists():
        return False
    if path.suffix == ".rs":
        return re.search(rf"#\[test\]\s*fn {re.escape(name)}\(", path.read_text()) is not None
    if path.name == "test_codec_matrix.py":
        return name in _codec_matrix_ids(path)
    return re.search(rf"^def {re.escape(name)}\(", path.read_text(), re.MULTILINE) is not None


_PLUGIN_SOURCE = PLUGINS.read_text()
_MODE_SOURCE = OPEN_MODE.read_text()


def test_the_source_is_read() -> None:
    """The parsers see the tables (an empty parse would make every check below vacuous)."""
    assert len(registrations(_PLUGIN_SOURCE)) == _PLUGIN_SOURCE.count("register(&") + len(
        re.findall(r"register\(\n", _PLUGIN_SOURCE)
    )
    assert store_modes(_MODE_SOURCE) == {
        "r": "Read",
        "r+": "ReadWrite",
        "a": "Append",
        "w": "Write",
        "w-": "WriteNew",
        "x": "WriteNew",
    }


def test_each_plugin_is_registered_and_read_by_a_test() -> None:
    assert plugin_problems(registrations(_PLUGIN_SOURCE)) == []


def test_the_tests_that_read_each_plugin_exist() -> None:
    missing = [r for readers in PLUGIN_READERS.values() for r in readers if not _reader_exists(r)]
    assert missing == []


def test_each_store_mode_is_parsed_and_opened_by_a_test() -> None:
    assert mode_problems(_MODE_SOURCE) == []


@pytest.mark.parametrize("create", [r.create for r in registrations(_PLUGIN_SOURCE)])
def test_deleting_a_plugin_registration_is_reported(create: str) -> None:
    mutated = without_registration(_PLUGIN_SOURCE, create)
    assert len(registrations(mutated)) == len(registrations(_PLUGIN_SOURCE)) - 1
    assert plugin_problems(registrations(mutated)) == [
        f"{create} is not registered, and {', '.join(PLUGIN_READERS[create])} read through it"
    ]


@pytest.mark.parametrize("mode", sorted(store_modes(_MODE_SOURCE)))
def test_deleting_a_store_mode_is_reported(mode: str) -> None:
    mutated = without_mode(_MODE_SOURCE, mode)
    assert set(store_modes(mutated)) == set(store_modes(_MODE_SOURCE)) - {mode}
    (problem,) = mode_problems(mutated)
    assert problem.startswith(f"mode {mode!r} is not parsed, and ")


def test_a_registration_without_a_test_is_reported() -> None:
    """The other way round: a plugin added with no test that reads through it."""
    added = _PLUGIN_SOURCE.replace(
        "    defaults::install();",
        '    register(&["numcodecs.new"], &["new"], new::create);\n    defaults::install();',
    )
    assert plugin_problems(registrations(added)) == [
        "new::create is registered but no test reads through it"
    ]


def test_hiding_code_behind_a_test_only_item_does_not_shorten_a_file() -> None:
    """A `#[cfg(test)]` on a function near the top of a real file counts as code, and so
    does all that follows; code added past the cap is refused."""
    path = ROOT / "codecs" / "src" / "store" / "remote.rs"
    text = path.read_text()
    header_end = text.index("\n\n") + 2  # after the `//!` opening
    mutated = text[:header_end] + "#[cfg(test)]\nfn only_in_tests() {}\n\n" + text[header_end:]
    assert code_lines(mutated) == code_lines(text) + 3
    padded = mutated + "fn more() {}\n" * (CODE_LINES_AT_MOST - code_lines(mutated) + 1)
    assert code_lines(padded) == CODE_LINES_AT_MOST + 1

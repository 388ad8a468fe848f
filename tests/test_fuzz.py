"""Property-based fuzzing (hypothesis) of the ncu CSV reader and the profile and manifest loaders: every mutated
real document ends in a clean one-line InputError naming the file, or in a result that is right."""

import contextlib
import csv
import gzip
import json
import math
import tempfile
from pathlib import Path

import pytest

hypothesis = pytest.importorskip("hypothesis")
jsonschema = pytest.importorskip("jsonschema")
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from colopred.errors import InputError  # noqa: E402
from colopred.measurement.profiling.ncu_csv import read_ncu_csv  # noqa: E402
from colopred.profile import JobProfile  # noqa: E402
from colopred.runtime.manifest import read_manifest, shipped_models_dir  # noqa: E402
from colopred.schema import schema_text  # noqa: E402

from .conftest import DATA, SAMPLE  # noqa: E402

FUZZ = settings(max_examples=120, deadline=None, print_blob=False, verbosity=hypothesis.Verbosity.quiet, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
REPORT = gzip.open(SAMPLE, "rt").read()
LINES = REPORT.splitlines()
HEADER_AT = next(i for i, l in enumerate(LINES) if l.startswith('"ID"'))
HEADER = next(csv.reader([LINES[HEADER_AT]]))
PROFILE = json.loads((DATA / "profiles" / "ncu" / "resnet18-b64-fp32.json").read_text())
MANIFEST_PATH = shipped_models_dir() / "h100-mps.json"
MANIFEST = json.loads(MANIFEST_PATH.read_text())

# ------------------------------------------------------------------------------------------- ncu reports
CHARS = st.sampled_from([",", '"', "\n", "", "1", ",1", '","', "x", "-", ".", "1,234", "nan", "=="])


@st.composite
def mutated_report(draw):
    lines = list(LINES)
    for _ in range(draw(st.integers(1, 3))):
        i = draw(st.integers(HEADER_AT, len(lines) - 1))
        line = lines[i]
        op = draw(st.sampled_from(["cut", "insert", "delete_line", "duplicate_line", "cell", "join"]))
        if op == "cut":
            lines[i] = line[: draw(st.integers(0, max(0, len(line) - 1)))]
        elif op == "insert":
            at = draw(st.integers(0, len(line)))
            lines[i] = line[:at] + draw(CHARS) + line[at:]
        elif op == "delete_line" and len(lines) > HEADER_AT + 3:
            del lines[i]
        elif op == "duplicate_line":
            lines.insert(i, line)
        elif op == "join" and i + 1 < len(lines):
            lines[i] = line[: draw(st.integers(0, len(line)))] + lines.pop(i + 1)
        elif op == "cell":
            try:
                cells = next(csv.reader([line]))
            except (csv.Error, StopIteration):
                continue
            if not cells:
                continue
            c = draw(st.integers(0, len(cells) - 1))
            cells[c] = draw(st.one_of(st.sampled_from(["", "n/a", "1,234", "1,5", "-1", "250", "inf", "1e400", "0", "12,345,678"]),
                                      st.text(max_size=8), st.floats(allow_nan=True).map(str)))
            out = []
            csv.writer(_Sink(out), quoting=csv.QUOTE_ALL, lineterminator="").writerow(cells)
            lines[i] = out[0]
    return "\n".join(lines) + "\n"


class _Sink:
    def __init__(self, out):
        self.out = out

    def write(self, s):
        self.out.append(s)


def _oracle(text: str):
    """Kernel ID -> (duration as printed, DRAM % as printed) of each data row, read with the csv module only."""
    rows = {}
    lines = text.split("\n")
    h = next(i for i, l in enumerate(lines) if l.startswith('"ID","Process ID"'))
    hdr = next(csv.reader([lines[h]]))
    it, ip = hdr.index("gpu__time_duration.sum"), hdr.index("dram__throughput.avg.pct_of_peak_sustained_elapsed")
    for line in lines[h + 2:]:
        if not line.strip() or line.lstrip().startswith("=="):
            continue
        cells = next(csv.reader([line]))
        assert len(cells) == len(hdr), "the reader accepted a row of another number of cells"
        rows.setdefault(int(cells[0]), []).append((cells[it], cells[ip]))
    return rows


@FUZZ
@given(mutated_report())
def test_ncu_reader_gives_a_clean_error_or_the_right_kernels(text):
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "r.csv"
        path.write_text(text)
        try:
            rep = read_ncu_csv(path)
        except InputError as e:
            msg = str(e)
            assert msg.startswith(str(path)) and "\n" not in msg and len(msg) < 600
            return
    k = rep.kernels
    oracle = _oracle(text)
    assert sum(len(v) for v in oracle.values()) == len(k)
    for kid, dur, dram in zip(k["kernel_id"], k["duration_ns"], k["dram_pct"]):
        printed = list(oracle[int(kid)])
        assert any(float(d.replace(",", "")) == dur and float(p) == dram for d, p in printed), (kid, dur, dram, printed)
        assert 0 <= dram <= 100.5 and dur >= 0 and math.isfinite(dur)
    assert k["duration_ns"].sum() > 0


# ------------------------------------------------------------------------------------------- JSON documents
JSON = st.recursive(st.none() | st.booleans() | st.integers(-10**6, 10**20) | st.floats(allow_nan=True, allow_infinity=True)
                    | st.text(max_size=10),
                    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3),
                    max_leaves=6)


def _paths(doc, prefix=()):
    yield prefix
    if isinstance(doc, dict):
        for k, v in doc.items():
            yield from _paths(v, (*prefix, k))


@st.composite
def mutated_doc(draw, base):
    doc = json.loads(json.dumps(base))
    for _ in range(draw(st.integers(1, 3))):
        paths = [p for p in _paths(doc) if p]
        if not paths:
            break
        p = draw(st.sampled_from(paths))
        node = doc
        for k in p[:-1]:
            node = node[k]
        if draw(st.booleans()):
            node[p[-1]] = draw(JSON)
        else:
            del node[p[-1]]
    text = json.dumps(doc, allow_nan=True)
    if draw(st.integers(0, 4)) == 0:  # damage the text itself
        at = draw(st.integers(0, len(text)))
        text = text[:at] + draw(st.sampled_from(["", "{", "]", ",", '"', "\\", "NaN", "[" * 5000])) + text[at + draw(st.integers(0, 3)):]
    return text


@contextlib.contextmanager
def _loaded_or_refused(text: str, name: str, load):
    """``load`` of ``text`` written to a file ``name`` in a temporary folder: yields (path, the loaded object), or
    (path, None) after checking the refusal is one line naming the file; the file stays for the caller's checks."""
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / name
        path.write_text(text)
        try:
            obj = load(path)
        except InputError as e:
            msg = str(e)
            assert msg.startswith(str(path)) and "\n" not in msg
            obj = None
        yield path, obj


@FUZZ
@given(mutated_doc(PROFILE))
def test_profile_loader_gives_a_clean_error_or_a_valid_profile(text):
    v = jsonschema.Draft202012Validator(json.loads(schema_text("job_profile")))
    with _loaded_or_refused(text, "p.json", JobProfile.from_json) as (path, p):
        if p is not None:
            doc = p.to_dict()
            assert not list(v.iter_errors(doc))  # what loads is what the published schema allows
            path.write_text(json.dumps(doc))
            assert JobProfile.from_json(path) == p


@FUZZ
@given(mutated_doc(MANIFEST))
def test_manifest_loader_gives_a_clean_error_or_a_valid_manifest(text):
    v = jsonschema.Draft202012Validator(json.loads(schema_text("model_manifest")))
    with _loaded_or_refused(text, "m.json", read_manifest) as (_path, man):
        if man is not None:
            assert not list(v.iter_errors(man))
            for part in ("point", "interval"):
                assert Path(man["files"][part]["path"]).name == man["files"][part]["path"]

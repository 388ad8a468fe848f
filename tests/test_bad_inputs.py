"""Bad inputs to every command: each is refused with one line naming the file or argument, a non-zero exit code,
no traceback, and no file that existed before changed (nor a temporary file left behind)."""

import fcntl
import gzip
import hashlib
import json
import shutil
from pathlib import Path

import pytest

from colopred.cli import main
from colopred.runtime.manifest import shipped_models_dir

from .conftest import DATA, FIXTURES, FULL_REPORT, with_cell

P1 = DATA / "profiles" / "ncu" / "resnet18-b64-fp32.json"
P2 = DATA / "profiles" / "ncu" / "lstm_lm-b64-fp32.json"
NVML = DATA / "profiles" / "nvml"
SMOKE = DATA / "campaigns" / "h100-smoke"
TIMELINE = DATA / "timelines" / "alexnet-b128-fp32.timeline.csv.gz"
TRACE = FIXTURES / "gin-b1024-fp32.trace.json.gz"


def snapshot(root: Path) -> dict[str, str]:
    """SHA-256 of every file under ``root``."""
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(root.rglob("*")) if p.is_file()}


@pytest.fixture
def world(tmp_path):
    """A folder of valid inputs that each case damages one of."""
    w = tmp_path / "w"
    w.mkdir()
    shutil.copy(FULL_REPORT, w / "r.csv.gz")
    (w / "r.csv").write_text(gzip.open(FULL_REPORT, "rt").read())
    shutil.copy(P1, w / "p1.json")
    shutil.copy(P2, w / "p2.json")
    # the cases damage the ncu profiles' models; leaving out the GPM ones halves the ~2 GB a run writes
    shutil.copytree(shipped_models_dir(), w / "model", ignore=shutil.ignore_patterns("*-nvml.*"))
    shutil.copytree(SMOKE, w / "camp")
    shutil.copy(TIMELINE, w / "tl.csv.gz")
    shutil.copy(TRACE, w / "trace.json.gz")
    (w / "existing.json").write_text("precious")
    (w / "afile").write_text("a file, not a folder")
    (w / "adir").mkdir()
    return w


# ------------------------------------------------------------------------------------------ file damage
def report_lines(w):
    lines = (w / "r.csv").read_text().splitlines()
    h = next(i for i, l in enumerate(lines) if l.startswith('"ID"'))
    return lines, h


def col(lines, h, name):
    import csv

    return next(csv.reader([lines[h]])).index(name)


def set_cell(w, metric, value, row=5):
    (w / "r.csv").write_text(with_cell((w / "r.csv").read_text(), metric, value, row))


def all_cells(w, metric, value):
    import csv
    import io

    lines, h = report_lines(w)
    c = col(lines, h, metric)
    for i in range(h + 2, len(lines)):
        cells = next(csv.reader([lines[i]]))
        if not cells[0].isdigit():
            continue
        cells[c] = value
        buf = io.StringIO()
        csv.writer(buf, quoting=csv.QUOTE_ALL, lineterminator="").writerow(cells)
        lines[i] = buf.getvalue()
    (w / "r.csv").write_text("\n".join(lines) + "\n")


def edit_lines(f):
    def setup(w):
        lines, h = report_lines(w)
        (w / "r.csv").write_text("\n".join(f(lines, h)) + "\n")

    return setup


def cut_row(lines, h):
    lines[h + 6] = lines[h + 6][: len(lines[h + 6]) // 2]
    return lines


def merge_rows(lines, h):
    lines[h + 6] = lines[h + 6][: len(lines[h + 6]) // 2] + lines.pop(h + 7)
    return lines


def extra_cell(lines, h):
    lines[h + 4] += ',"1"'
    return lines


def stray_quote(lines, h):
    lines[h + 4] = lines[h + 4].replace('","', '"",', 1)
    return lines


def long_header(lines, h):
    lines[h] += ',"' + "y" * 200_000 + '"'
    return lines


def write(name, text):
    def setup(w):
        (w / name).write_text(text) if isinstance(text, str) else (w / name).write_bytes(text)

    return setup


def truncated_gz(w):
    data = (w / "r.csv.gz").read_bytes()
    (w / "r.csv.gz").write_bytes(data[: len(data) // 2])


def profile_with(**changes):
    def setup(w):
        d = json.loads((w / "p1.json").read_text())
        for k, v in changes.items():
            if "." in k:
                a, b = k.split(".")
                d[a][b] = v
            elif v is DELETE:
                d.pop(k)
            else:
                d[k] = v
        (w / "bad.json").write_text(json.dumps(d))

    return setup


DELETE = object()


def manifest_with(_mode="mps", **changes):
    def setup(w):
        path = w / "model" / f"h100-{_mode}.json"
        d = json.loads(path.read_text())
        for k, v in changes.items():
            if "." in k:
                parts = k.split(".")
                node = d
                for p in parts[:-1]:
                    node = node[p]
                node[parts[-1]] = v
            elif v is DELETE:
                d.pop(k)
            else:
                d[k] = v
        path.write_text(json.dumps(d))

    return setup


def model_file(mode, part, data_from=None, junk=None):
    """Replace ``mode``'s ``part`` file by ``junk`` bytes or by another model's file, with its checksum made to match."""

    def setup(w):
        man = w / "model" / f"h100-{mode}.json"
        d = json.loads(man.read_text())
        f = w / "model" / d["files"][part]["path"]
        data = junk if junk is not None else (w / "model" / data_from).read_bytes()
        f.write_bytes(data)
        d["files"][part]["sha256"] = hashlib.sha256(data).hexdigest()
        man.write_text(json.dumps(d))

    return setup


def records(f):
    def setup(w):
        recs = [json.loads(l) for l in (w / "camp" / "windows.jsonl").read_text().splitlines()]
        (w / "camp" / "windows.jsonl").write_text("".join(json.dumps(r) + "\n" for r in f(recs)))

    return setup


def with_result(recs, kind, key, value):
    r = next(r for r in recs if r["kind"] == kind and r["status"] == "ok")
    r["results"][r["jobs"][0]][key] = value
    return recs


def trace_events(events):
    def setup(w):
        with gzip.open(w / "bad.json.gz", "wt") as f:
            json.dump({"traceEvents": events}, f)

    return setup


def timeline_csv(text):
    def setup(w):
        with gzip.open(w / "bad.csv.gz", "wt") as f:
            f.write(text)

    return setup


def dataset(kind):
    def setup(w):
        d = w / "data"
        (d / "profiles" / "ncu").mkdir(parents=True)
        for p in (P1, P2):
            shutil.copy(p, d / "profiles" / "ncu" / p.name)
        if kind == "no-campaigns":
            return
        shutil.copytree(SMOKE, d / "campaigns" / "h100-smoke")
        if kind == "dup-profile":
            shutil.copy(P1, d / "profiles" / "ncu" / "again.json")
        if kind == "empty-records":
            (d / "campaigns" / "h100-smoke" / "windows.jsonl").write_text("")

    return setup


def nothing(w):
    pass


H100 = "NVIDIA H100 80GB HBM3"
TABLE_HEAD = "set_id,job,mode,solo_ms,colo_ms,gpu,gpu_util_pct,mem_util_pct,sm_occupancy_pct\n"
TABLE_A = f"s1,a,mps,10,15,{H100},90,40,30\n"
TABLE_B = f"s1,b,mps,20,25,{H100},80,30,20\n"


def table(*rows, head=TABLE_HEAD):
    return write("t.csv", head + "".join(rows))


def jobs_file(*entries):
    return write("jobs.json", json.dumps({"jobs": list(entries)}))


IMPORT = ["import", "{w}/t.csv", "--out", "{w}/ds"]
CMD = {"name": "mine", "command": ["python", "train.py"]}
MEASURE_CMD = ["measure", "--out", "{w}/new", "--jobs-file", "{w}/jobs.json", "--sets", "pairs", "--mode", "mps", "--device", "cpu"]


KERNEL = {"ph": "X", "cat": "kernel", "name": "k", "ts": 1.0, "dur": 2.0, "args": {"stream": 7}}
NCU = ["profile", "ncu", "{w}/r.csv", "--name", "x", "--iter-ms", "200", "-o", "{w}/out.json"]
NCU_GZ = ["profile", "ncu", "{w}/r.csv.gz", "--name", "x", "--iter-ms", "200", "-o", "{w}/out.json"]
SHOW_BAD = ["profile", "show", "{w}/bad.json"]
PREDICT = ["predict", "{w}/p1.json", "{w}/p2.json", "--mode", "mps", "--model", "{w}/model/h100-mps.json"]
PREDICT_TS = ["predict", "{w}/p1.json", "{w}/p2.json", "--mode", "timeslice", "--model", "{w}/model/h100-timeslice.json"]
TABLE = ["table", "{w}/camp"]
OVERLAP = ["profile", "overlap", "{w}/p1.json", "--timeline", "{w}/bad.json.gz", "-o", "{w}/out.json"]
OVERLAP_CSV = ["profile", "overlap", "{w}/p1.json", "--timeline", "{w}/bad.csv.gz", "-o", "{w}/out.json"]
PMW = "dram__throughput.avg.pct_of_peak_sustained_elapsed"
OCC = "sm__warps_active.avg.pct_of_peak_sustained_active"
DUR = "gpu__time_duration.sum"

CASES = [
    # ---- profile ncu: the report
    ("ncu-missing", nothing, ["profile", "ncu", "{w}/nope.csv", "--name", "x", "--iter-ms", "200", "-o", "{w}/out.json"], "nope.csv: no such file"),
    ("ncu-dir", nothing, ["profile", "ncu", "{w}/adir", "--name", "x", "--iter-ms", "200", "-o", "{w}/out.json"], "is a directory"),
    ("ncu-empty", write("r.csv", ""), NCU, "no ncu CSV header"),
    ("ncu-binary", write("r.csv", bytes(range(256)) * 20), NCU, "no ncu CSV header"),
    ("ncu-cut-row", edit_lines(cut_row), NCU, "cut short"),
    ("ncu-merged-rows", edit_lines(merge_rows), NCU, "merged with the next"),
    ("ncu-extra-cell", edit_lines(extra_cell), NCU, "cells where the header has"),
    ("ncu-stray-quote", edit_lines(stray_quote), NCU, "r.csv: malformed line"),
    ("ncu-long-header-field", edit_lines(long_header), NCU, "r.csv"),
    ("ncu-header-only", edit_lines(lambda l, h: l[: h + 1]), NCU, "truncated"),
    ("ncu-no-units", edit_lines(lambda l, h: l[:h + 1] + l[h + 2:]), NCU, "units row"),
    ("ncu-pct-over-100", lambda w: set_cell(w, PMW, "250.5"), NCU, "outside 0..100.5 %"),
    ("ncu-pct-negative", lambda w: set_cell(w, OCC, "-3"), NCU, "outside"),
    ("ncu-pct-thousands", lambda w: set_cell(w, PMW, "1,234"), NCU, "is '1,234', outside 0..100.5 %"),
    ("ncu-pct-decimal-comma", lambda w: set_cell(w, OCC, "1,5"), NCU, "thousands separator"),
    ("ncu-pct-nan", lambda w: set_cell(w, PMW, "nan"), NCU, "not a finite number"),
    ("ncu-pct-inf", lambda w: set_cell(w, OCC, "inf"), NCU, "not a finite number"),
    ("ncu-pct-text", lambda w: set_cell(w, PMW, "abc"), NCU, "not a finite number"),
    ("ncu-pct-empty", lambda w: set_cell(w, PMW, ""), NCU, "is empty"),
    ("ncu-duration-negative", lambda w: set_cell(w, DUR, "-5"), NCU, "outside 0..inf"),
    ("ncu-duration-text", lambda w: set_cell(w, DUR, "fast"), NCU, "not a finite number"),
    ("ncu-duration-bad-separator", lambda w: set_cell(w, DUR, "1,23"), NCU, "misplaced thousands separator"),
    ("ncu-duration-empty", lambda w: set_cell(w, DUR, ""), NCU, "is empty"),
    ("ncu-all-durations-zero", lambda w: all_cells(w, DUR, "0"), NCU, "every kernel has gpu__time_duration.sum 0"),
    ("ncu-kernel-id-text", edit_lines(lambda l, h: l[:h + 3] + ['"kernel","x"'] + l[h + 3:]), NCU, "is not a kernel ID"),
    ("ncu-truncated-gz", truncated_gz, NCU_GZ, "truncated or corrupt gzip"),
    ("ncu-corrupt-gz", write("r.csv.gz", b"\x1f\x8b" + bytes(1000)), NCU_GZ, "truncated or corrupt gzip"),
    ("ncu-process-absent", nothing, NCU + ["--process", "999"], "process_id 999 is not in the report"),
    # ---- profile ncu: the arguments
    ("ncu-output-is-input", nothing, ["profile", "ncu", "{w}/r.csv", "--name", "x", "--iter-ms", "200", "-o", "{w}/r.csv"], "is the input"),
    ("ncu-output-is-input-relative", nothing, ["profile", "ncu", "{w}/r.csv", "--name", "x", "--iter-ms", "200", "-o", "{w}/adir/../r.csv"], "is the input"),
    ("ncu-output-is-dir", nothing, NCU[:-1] + ["{w}/adir"], "is a directory"),
    ("ncu-output-folder-missing", nothing, NCU[:-1] + ["{w}/nowhere/out.json"], "does not exist"),
    ("ncu-output-under-file", nothing, NCU[:-1] + ["{w}/afile/out.json"], "afile' is a file, not a folder"),
    ("ncu-empty-name", nothing, ["profile", "ncu", "{w}/r.csv", "--name", "", "--iter-ms", "200", "-o", "{w}/out.json"], "--name must not be empty"),
    ("ncu-blank-name", nothing, ["profile", "ncu", "{w}/r.csv", "--name", "  ", "--iter-ms", "200", "-o", "{w}/out.json"], "--name must not be empty"),
    ("ncu-newline-name", nothing, ["profile", "ncu", "{w}/r.csv", "--name", "a\nb", "--iter-ms", "200", "-o", "{w}/out.json"], "--name must be one line"),
    ("ncu-long-name", nothing, ["profile", "ncu", "{w}/r.csv", "--name", "n" * 300, "--iter-ms", "200", "-o", "{w}/out.json"], "--name must be one line"),
    ("ncu-mem-negative", nothing, NCU + ["--mem-gib", "-5"], "--mem-gib must be a finite positive number"),
    ("ncu-mem-nan", nothing, NCU + ["--mem-gib", "nan"], "--mem-gib must be a finite positive number"),
    ("ncu-mem-inf", nothing, NCU + ["--mem-gib", "inf"], "--mem-gib must be a finite positive number"),
    ("ncu-mem-huge", nothing, NCU + ["--mem-gib", "5000"], "--mem-gib 5000 is more than 1024"),
    ("ncu-mem-over-gpu", nothing, NCU + ["--mem-gib", "500"], "exceeds the GPU's memory"),
    ("ncu-iter-nan", nothing, ["profile", "ncu", "{w}/r.csv", "--name", "x", "--iter-ms", "nan", "-o", "{w}/out.json"], "--iter-ms"),
    ("ncu-iter-zero", nothing, ["profile", "ncu", "{w}/r.csv", "--name", "x", "--iter-ms", "0", "-o", "{w}/out.json"], "--iter-ms"),
    ("ncu-iter-huge", nothing, ["profile", "ncu", "{w}/r.csv", "--name", "x", "--iter-ms", "1e9", "-o", "{w}/out.json"], "iteration_ms must be at most"),
    ("ncu-iterations-zero", nothing, NCU + ["--iterations", "0"], "--iterations must be a positive integer"),
    # ---- profiles: show (every loader of profiles is JobProfile.from_json)
    ("profile-missing", nothing, ["profile", "show", "{w}/nope.json"], "nope.json: no such file"),
    ("profile-dir", nothing, ["profile", "show", "{w}/adir"], "adir: is a directory, not a profile"),
    ("profile-empty", write("bad.json", ""), SHOW_BAD, "not valid JSON"),
    ("profile-binary", write("bad.json", b"\xff\xfe\x00garbage"), SHOW_BAD, "bad.json: is not a text profile (JSON) (binary data)"),
    ("profile-gzip", write("bad.json", gzip.compress(b'{"name": "x"}')), SHOW_BAD, "is not a text profile (JSON) (it is gzip-compressed)"),
    ("profile-list", write("bad.json", "[1, 2]"), SHOW_BAD, "not a colopred profile"),
    ("profile-deep-nesting", write("bad.json", "[" * 100_000 + "]" * 100_000), SHOW_BAD, "nested too deeply"),
    ("profile-deep-meta", profile_with(meta=json.loads("[" * 60 + "]" * 60)), SHOW_BAD, "meta must be an object"),
    ("profile-deep-meta-object", profile_with(meta=json.loads('{"a":' * 60 + "1" + "}" * 60)), SHOW_BAD, "meta nests deeper than 32"),
    ("profile-other-schema", profile_with(schema="colopred.model"), SHOW_BAD, "not a colopred profile"),
    ("profile-version", profile_with(schema_version=2), SHOW_BAD, "schema version 2"),
    ("profile-no-name", profile_with(name=DELETE), SHOW_BAD, "missing field 'name'"),
    ("profile-empty-name", profile_with(name=""), SHOW_BAD, "name must not be empty"),
    ("profile-name-newline", profile_with(name="a\nb"), SHOW_BAD, "name"),
    ("profile-name-number", profile_with(name=5), SHOW_BAD, "name must be a string"),
    ("profile-iter-negative", profile_with(iteration_ms=-1), SHOW_BAD, "iteration_ms must be at least 0.01"),
    ("profile-iter-string", profile_with(iteration_ms="10"), SHOW_BAD, "iteration_ms must be a finite number"),
    ("profile-iter-nan", profile_with(iteration_ms=float("nan")), SHOW_BAD, "iteration_ms must be a finite number"),
    ("profile-iter-huge", profile_with(iteration_ms=1e12), SHOW_BAD, "iteration_ms must be at most"),
    ("profile-busy-3.9", profile_with(busy_fraction=3.9), SHOW_BAD, "busy_fraction must be at most 2"),
    ("profile-busy-negative", profile_with(busy_fraction=-0.1), SHOW_BAD, "busy_fraction must be at least 0"),
    ("profile-dram-150", profile_with(dram_util_pct=150.0), SHOW_BAD, "dram_util_pct must be at most 100.5"),
    ("profile-dram-null", profile_with(dram_util_pct=None), SHOW_BAD, "dram_util_pct must be a finite number"),
    ("profile-kernels-1e300", profile_with(kernels_per_iteration=1e300), SHOW_BAD, "kernels_per_iteration"),
    ("profile-wait-1e12", profile_with(mps_wait_us=1e12), SHOW_BAD, "mps_wait_us"),
    ("profile-wait-negative", profile_with(mps_wait_us=-1.0), SHOW_BAD, "mps_wait_us must be at least 0"),
    ("profile-kernel-ms-over-iteration", profile_with(kernel_ms_per_iteration=1e6), SHOW_BAD, "kernel_ms_per_iteration"),
    ("profile-memory-over-gpu", profile_with(peak_memory_gib=500.0), SHOW_BAD, "exceeds the GPU's memory"),
    ("profile-gpu-memory-absurd", profile_with(**{"gpu.memory_gib": 5000.0}), SHOW_BAD, "gpu.memory_gib must be at most 1024"),
    ("profile-gpu-sm-zero", profile_with(**{"gpu.sm_count": 0}), SHOW_BAD, "gpu.sm_count must be at least 1"),
    ("profile-gpu-string", profile_with(gpu="H100"), SHOW_BAD, "gpu must be an object"),
    ("profile-unknown-field", profile_with(colour="red"), SHOW_BAD, "colour is not a known field"),
    ("profile-source", profile_with(source="nsys"), SHOW_BAD, "source must be one of"),
    ("profile-iterations-zero", profile_with(iterations_profiled=0), SHOW_BAD, "iterations_profiled must be at least 1"),
    ("profile-iterations-fraction", profile_with(iterations_profiled=1.5), SHOW_BAD, "iterations_profiled must be an integer"),
    ("profile-overlap-below-1", profile_with(stream_overlap=0.5), SHOW_BAD, "stream_overlap must be at least 1"),
    ("profile-distribution-text", profile_with(distributions={"dram_pct": {"p10": "x"}}), SHOW_BAD, "distributions.dram_pct.p10"),
    ("profile-bool-number", profile_with(busy_fraction=True), SHOW_BAD, "busy_fraction must be a finite number"),
    # ---- profile retime
    ("retime-nan", nothing, ["profile", "retime", "{w}/p1.json", "--iter-ms", "nan", "-o", "{w}/out.json"], "--iter-ms"),
    ("retime-negative", nothing, ["profile", "retime", "{w}/p1.json", "--iter-ms", "-1", "-o", "{w}/out.json"], "--iter-ms"),
    ("retime-too-fast", nothing, ["profile", "retime", "{w}/p1.json", "--iter-ms", "0.5", "-o", "{w}/out.json"], "busy_fraction"),
    ("retime-output-dir", nothing, ["profile", "retime", "{w}/p1.json", "--iter-ms", "20", "-o", "{w}/adir"], "is a directory"),
    ("retime-output-folder-missing", nothing, ["profile", "retime", "{w}/p1.json", "--iter-ms", "20", "-o", "{w}/no/out.json"], "does not exist"),
    ("retime-bad-profile", profile_with(busy_fraction=9.0), ["profile", "retime", "{w}/bad.json", "--iter-ms", "20", "-o", "{w}/out.json"], "bad.json"),
    # ---- profile overlap: timelines and traces
    ("overlap-missing", nothing, ["profile", "overlap", "{w}/p1.json", "--timeline", "{w}/nope.json", "-o", "{w}/out.json"], "nope.json: no such file"),
    ("overlap-output-is-timeline", nothing, ["profile", "overlap", "{w}/p1.json", "--timeline", "{w}/tl.csv.gz", "-o", "{w}/tl.csv.gz"], "is the input"),
    ("overlap-no-ts", trace_events([{**KERNEL, "ts": None}]), OVERLAP, "lacks a numeric ts"),
    ("overlap-ts-missing", trace_events([{k: v for k, v in KERNEL.items() if k != "ts"}]), OVERLAP, "lacks a numeric ts"),
    ("overlap-dur-negative", trace_events([{**KERNEL, "dur": -4}]), OVERLAP, "non-negative dur"),
    ("overlap-dur-text", trace_events([{**KERNEL, "dur": "long"}]), OVERLAP, "non-negative dur"),
    ("overlap-odd-events", trace_events([1, "x", None, [2]]), OVERLAP, "no GPU kernel"),
    ("overlap-events-not-list", write("bad.json.gz", gzip.compress(b'{"traceEvents": {"a": 1}}')), OVERLAP, "traceEvents is not a list"),
    ("overlap-args-odd", trace_events([{**KERNEL, "args": "x"}, {**KERNEL, "ts": 5.0, "args": {"stream": "s"}}]), OVERLAP + ["--", ], None),
    ("overlap-not-json", write("bad.json.gz", gzip.compress(b"{nope")), OVERLAP, "not a readable Chrome trace"),
    ("overlap-deep-json", write("bad.json.gz", gzip.compress(b"[" * 100_000)), OVERLAP, "not a readable Chrome trace"),
    ("overlap-truncated-gz", write("bad.json.gz", gzip.compress(b'{"traceEvents": []}' * 50)[:30]), OVERLAP, "not a readable Chrome trace"),
    ("overlap-csv-columns", timeline_csv("a,b\n1,2\n"), OVERLAP_CSV, "missing columns"),
    ("overlap-csv-text-dur", timeline_csv("kind,name,start_us,dur_us,correlation,stream\nkernel,k,0,abc,1,7\n"), OVERLAP_CSV, "dur_us"),
    ("overlap-csv-negative-dur", timeline_csv("kind,name,start_us,dur_us,correlation,stream\nkernel,k,0,-3,1,7\n"), OVERLAP_CSV, "dur_us"),
    ("overlap-csv-empty", timeline_csv(""), OVERLAP_CSV, "not a readable timeline table"),
    ("overlap-csv-no-kernel", timeline_csv("kind,name,start_us,dur_us,correlation,stream\nmemcpy,k,0,3,1,7\n"), OVERLAP_CSV, "no GPU kernel"),
    ("overlap-absurd", trace_events([{**KERNEL, "ts": 0.0, "dur": 10.0, "args": {"stream": i}} for i in range(100)]), OVERLAP, "stream overlap"),
    ("overlap-wrong-extension", write("bad.txt", "x"), ["profile", "overlap", "{w}/p1.json", "--timeline", "{w}/bad.txt", "-o", "{w}/out.json"], "expected a colopred timeline"),
    # ---- predict: profiles and arguments
    ("predict-one", nothing, ["predict", "{w}/p1.json", "--mode", "mps"], "at least two profiles"),
    ("predict-same-name-other-profile", profile_with(iteration_ms=20.0), ["predict", "{w}/p1.json", "{w}/bad.json", "--mode", "mps"],
     "bad.json: holds another profile of job 'resnet18-b64-fp32' than"),
    ("predict-bad-profile", profile_with(mps_wait_us=1e12), ["predict", "{w}/p1.json", "{w}/bad.json", "--mode", "mps"], "bad.json"),
    ("predict-too-many", nothing, ["predict"] + [str(p) for p in sorted((DATA / "profiles" / "ncu").glob("*.json"))[:17]] + ["--mode", "mps"], "at most 16"),
    ("predict-model-missing", nothing, PREDICT[:-1] + ["{w}/nope.json"], "nope.json: no such file"),
    ("predict-model-dir", nothing, PREDICT[:-1] + ["{w}/adir"], "is a directory"),
    ("predict-model-other-mode", nothing, PREDICT[:-1] + ["{w}/model/h100-timeslice.json"], "model is for mode 'timeslice'"),
    # ---- predict: manifests
    ("manifest-not-json", write("model/h100-mps.json", "{oops"), PREDICT, "not a colopred model manifest"),
    ("manifest-deep", write("model/h100-mps.json", "[" * 100_000 + "]" * 100_000), PREDICT, "nested too deeply"),
    ("manifest-no-files", manifest_with(files=DELETE), PREDICT, "missing field 'files'"),
    ("manifest-no-mode", manifest_with(mode=DELETE), PREDICT, "missing field 'mode'"),
    ("manifest-mode-type", manifest_with(mode=3), PREDICT, "mode must be one of"),
    ("manifest-features-type", manifest_with(features="all"), PREDICT, "features must be an array"),
    ("manifest-coef-huge", manifest_with(**{"baseline_coefs.contention_load": 1e308}), PREDICT, "baseline_coefs.contention_load must be at most 100"),
    ("manifest-coef-nan", manifest_with(**{"baseline_coefs.wait_full_grid": float("nan")}), PREDICT, "baseline_coefs.wait_full_grid must be a finite number"),
    ("manifest-coef-extra", manifest_with(**{"baseline_coefs.other": 1.0}), PREDICT, "baseline_coefs.other is not a known field"),
    ("manifest-width-huge", manifest_with(conformal_log_width=50.0), PREDICT, "conformal_log_width must be at most 2"),
    ("manifest-class-width-missing", manifest_with(interval_classes="host_bound", conformal_class_log_widths={"saturating": 0.1}),
     PREDICT, "conformal_class_log_widths lacks the host_bound class"),
    ("manifest-class-width-huge", manifest_with(interval_classes="host_bound", conformal_class_log_widths={"saturating": 0.1, "host_bound": 9.0}),
     PREDICT, "conformal_class_log_widths.host_bound must be at most 2"),
    ("manifest-classes-unknown", manifest_with(interval_classes="by_size"), PREDICT, "interval_classes"),
    ("manifest-quantiles", manifest_with(interval_quantiles=[0.05, 1.5]), PREDICT, "interval_quantiles[1] must be less than 1"),
    ("manifest-path-absolute", manifest_with(**{"files.point.path": "/etc/passwd"}), PREDICT, "files.point.path"),
    ("manifest-path-parent", manifest_with(**{"files.point.path": "../p1.json"}), PREDICT, "files.point.path"),
    ("manifest-path-dotdot", manifest_with(**{"files.interval.path": ".."}), PREDICT, "files.interval.path"),
    ("manifest-sha-type", manifest_with(**{"files.point.sha256": 5}), PREDICT, "files.point.sha256 must be a string"),
    ("manifest-file-missing", manifest_with(**{"files.point.path": "gone.ubj"}), PREDICT, "gone.ubj: model file listed in the manifest is missing"),
    ("manifest-checksum", manifest_with(**{"files.point.sha256": "0" * 64}), PREDICT, "checksum mismatch"),
    ("manifest-max-set-size", manifest_with(max_set_size=1), PREDICT, "max_set_size must be at least 2"),
    ("manifest-ranges", manifest_with(feature_ranges={"t_busy": [1]}), PREDICT, "feature_ranges.t_busy must hold at least 2 items"),
    ("manifest-ranges-unknown", manifest_with(feature_ranges={"t_colour": [0, 1]}), PREDICT, "feature_ranges.t_colour"),
    ("manifest-load-kind", manifest_with(contention_load="symmetric"), PREDICT, "contention_load 'symmetric' is not the mps mode's"),
    ("model-corrupt-checksum-matches", model_file("mps", "point", junk=b"\x00garbage" * 100), PREDICT, "not a valid XGBoost model file"),
    ("model-truncated-checksum-matches", lambda w: model_file("mps", "point", junk=(w / "model" / "h100-mps.point.ubj").read_bytes()[:999])(w),
     PREDICT, "not a valid XGBoost model file"),
    ("model-other-mode-trees", model_file("mps", "point", data_from="h100-timeslice.point.ubj"), PREDICT, "model of the other mode"),
    ("model-swapped-files", model_file("timeslice", "point", data_from="h100-timeslice.interval.ubj"), PREDICT_TS, "swapped"),
    # ---- table
    ("table-missing", nothing, ["table", "{w}/nope"], "nope: no such file"),
    ("table-empty-dir", nothing, ["table", "{w}/adir"], "no windows.jsonl"),
    ("table-empty-records", write("camp/windows.jsonl", ""), TABLE, "no window records"),
    ("table-not-json", write("camp/windows.jsonl", "{oops\n"), TABLE, "line 1 is not valid JSON"),
    ("table-deep-line", write("camp/windows.jsonl", "[" * 100_000 + "]" * 100_000 + "\n"), TABLE, "line 1 is not a window record"),
    ("table-binary", write("camp/windows.jsonl", b"\xff\xfe\x00\n"), TABLE, "windows.jsonl: is not a text JSONL record file"),
    ("table-not-object", write("camp/windows.jsonl", "[1]\n"), TABLE, "line 1 is not a JSON object"),
    ("table-record-without-mode", records(lambda rs: [{k: v for k, v in r.items() if k != "mode"} for r in rs]), TABLE, "record 1 is not a window record"),
    ("table-jobs-not-list", records(lambda rs: [{**r, "jobs": "a+b"} for r in rs]), TABLE, "record 1 is not a window record"),
    ("table-solo-zero", records(lambda rs: with_result(rs, "solo", "mean_ms", 0)), TABLE, "mean_ms is 0"),
    ("table-solo-negative", records(lambda rs: with_result(rs, "solo", "mean_ms", -3.0)), TABLE, "must be a positive number"),
    ("table-colo-text", records(lambda rs: with_result(rs, "colo", "mean_ms", "slow")), TABLE, "mean_ms is slow"),
    ("table-duplicate-window", records(lambda rs: rs + [rs[1]]), TABLE, "windows.jsonl: window"),
    ("table-no-collocation", records(lambda rs: [r for r in rs if r["kind"] == "solo"]), TABLE, "no collocated window"),
    ("table-output-is-input", nothing, ["table", "{w}/camp/windows.jsonl", "-o", "{w}/camp/windows.jsonl"], "is the input"),
    ("table-output-dir", nothing, ["table", "{w}/camp", "-o", "{w}/adir"], "is a directory"),
    ("table-output-folder-missing", nothing, ["table", "{w}/camp", "-o", "{w}/no/t.csv"], "does not exist"),
    ("table-observations-is-input", nothing, ["table", "{w}/camp/windows.jsonl", "--observations", "{w}/camp/windows.jsonl"], "is the input"),
    ("table-observations-dir", nothing, ["table", "{w}/camp", "--observations", "{w}/adir"], "is a directory"),
    ("table-observations-profiles-missing", nothing, ["table", "{w}/camp", "--observations", "{w}/o.json", "--profiles", "{w}/nope"],
     "not a folder of profiles"),
    ("table-observations-no-profile", nothing, ["table", "{w}/camp", "--observations", "{w}/o.json", "--profiles", "{w}/adir"],
     "no profile of job"),
    ("table-profiles-without-observations", nothing, ["table", "{w}/camp", "--profiles", "{w}/adir"], "give --observations FILE too"),
    # ---- calibrate (refused before any window is measured)
    ("calibrate-itself", nothing, ["calibrate", "resnet50-b64-fp32", "--out", "{w}/cal", "--device", "cpu"], "is the job to calibrate"),
    ("calibrate-unknown-job", nothing, ["calibrate", "mytrain", "--out", "{w}/cal", "--device", "cpu"], "job: bad job name 'mytrain'"),
    ("calibrate-no-profile", nothing, ["calibrate", "mytrain", "--out", "{w}/cal", "--profiles", "{w}/adir", "--device", "cpu"],
     "no profile of job mytrain"),
    ("calibrate-profiles-not-a-folder", nothing, ["calibrate", "mytrain", "--out", "{w}/cal", "--profiles", "{w}/nope", "--device", "cpu"],
     "nope: --profiles: not a folder of profiles"),
    # ---- train and evaluate
    ("train-data-missing", nothing, ["train", "-q", "--data", "{w}/nope", "--out", "{w}/m/x", "--no-metrics"], "nope: dataset directory not found"),
    ("train-data-empty", nothing, ["train", "-q", "--data", "{w}/adir", "--out", "{w}/m/x", "--no-metrics"], "adir"),
    ("train-no-campaigns", dataset("no-campaigns"), ["train", "-q", "--data", "{w}/data", "--out", "{w}/m/x", "--no-metrics"], "no windows.jsonl"),
    ("train-empty-records", dataset("empty-records"), ["train", "-q", "--data", "{w}/data", "--out", "{w}/m/x", "--no-metrics"], "no measured collocation"),
    ("train-duplicate-profile", dataset("dup-profile"), ["train", "-q", "--data", "{w}/data", "--out", "{w}/m/x", "--no-metrics"], "again.json"),
    ("train-out-under-file", dataset("ok"), ["train", "-q", "--data", "{w}/data", "--out", "{w}/afile/x", "--no-metrics", "--modes", "mps"], "afile"),
    ("train-out-empty", dataset("ok"), ["train", "-q", "--data", "{w}/data", "--out", "", "--no-metrics", "--modes", "mps"], "--out"),
    ("train-bad-modes", nothing, ["train", "-q", "--data", "{w}/data", "--out", "{w}/m/x", "--modes", "fast"], "--modes: unknown mode 'fast'"),
    ("evaluate-data-missing", nothing, ["evaluate", "-q", "--data", "{w}/nope", "--modes", "mps"], "nope: dataset directory not found"),
    ("evaluate-one-campaign", dataset("ok"), ["evaluate", "-q", "--data", "{w}/data", "--modes", "mps"], "data"),
    ("evaluate-out-is-file", dataset("ok"), ["evaluate", "-q", "--data", "{w}/data", "--modes", "mps", "--out", "{w}/afile"], "afile"),
    # ---- measure --resume on a damaged campaign folder
    ("measure-nothing", nothing, ["measure", "--out", "{w}/adir", "--resume", "--device", "cpu"], "nothing to resume"),
    ("measure-config-not-json", write("camp/campaign.json", "{oops"), ["measure", "--out", "{w}/camp", "--resume", "--device", "cpu"], "campaign.json: not a valid campaign.json"),
    ("measure-config-list", write("camp/campaign.json", "[]"), ["measure", "--out", "{w}/camp", "--resume", "--device", "cpu"], "campaign.json: not a valid campaign.json"),
    ("measure-config-missing-key", lambda w: (w / "camp" / "campaign.json").write_text(json.dumps({k: v for k, v in json.loads((w / "camp" / "campaign.json").read_text()).items() if k != "jobs"})),
     ["measure", "--out", "{w}/camp", "--resume", "--device", "cpu"], "campaign.json: not a valid campaign.json"),
    ("measure-config-dir", lambda w: ((w / "camp" / "campaign.json").unlink(), (w / "camp" / "campaign.json").mkdir()),
     ["measure", "--out", "{w}/camp", "--resume", "--device", "cpu"], "is a directory"),
    ("measure-plan-changed", lambda w: (w / "camp" / "campaign.json").write_text(json.dumps({**json.loads((w / "camp" / "campaign.json").read_text()), "plan_sha256": "0" * 16})),
     ["measure", "--out", "{w}/camp", "--resume", "--device", "cpu"], "not the one recorded"),
    ("measure-foreign-record", records(lambda rs: rs + [{**rs[0], "window_id": "zzz"}]), ["measure", "--out", "{w}/camp", "--resume", "--device", "cpu"], "windows.jsonl: record 11"),
    ("measure-mismatched-record", records(lambda rs: [{**rs[0], "mode": "mps" if rs[0]["mode"] == "timeslice" else "timeslice"}] + rs[1:]),
     ["measure", "--out", "{w}/camp", "--resume", "--device", "cpu"], "does not match the plan"),
    ("measure-out-is-file", nothing, ["measure", "--out", "{w}/afile", "--resume", "--device", "cpu"], "afile: is a file"),
    ("measure-new-out-is-file", nothing, ["measure", "--out", "{w}/afile", "--jobs", "resnet18-b2-fp32,dlrm-b8-fp32", "--sets", "pairs",
                                           "--mode", "mps", "--device", "cpu"], "afile: is a file"),
    ("measure-bad-job", nothing, ["measure", "--out", "{w}/new", "--jobs", "nonsense", "--sets", "pairs", "--mode", "mps", "--device", "cpu"], "nonsense"),
    # ---- measure --jobs-file: training commands
    ("measure-jobs-file-missing", nothing, MEASURE_CMD, "jobs.json: no such file"),
    ("measure-jobs-file-not-json", write("jobs.json", "{jobs"), MEASURE_CMD, "jobs.json: not valid JSON"),
    ("measure-jobs-file-no-jobs", write("jobs.json", '{"jobs": []}'), MEASURE_CMD, "jobs.json: not a jobs file"),
    ("measure-jobs-file-no-command", jobs_file({"name": "mine"}), MEASURE_CMD, "jobs.json: job mine: command must be a non-empty list"),
    ("measure-jobs-file-shell-string", jobs_file({"name": "mine", "command": "python train.py"}), MEASURE_CMD, "command must be a non-empty list"),
    ("measure-jobs-file-bad-name", jobs_file({**CMD, "name": "a+b"}), MEASURE_CMD, "jobs.json: job 1: name 'a+b'"),
    ("measure-jobs-file-zoo-name", jobs_file({**CMD, "name": "resnet18-b2-fp32"}), MEASURE_CMD, "a zoo job's name"),
    ("measure-jobs-file-twice", jobs_file(CMD, CMD), MEASURE_CMD, "job mine is named twice"),
    ("measure-jobs-file-colopred-env", jobs_file({**CMD, "env": {"COLOPRED_WINDOW": "x"}}), MEASURE_CMD, "must not set COLOPRED_"),
    ("measure-jobs-file-unknown-field", jobs_file({**CMD, "shell": True}), MEASURE_CMD, "unknown field 'shell'"),
    ("measure-jobs-file-bad-peak", jobs_file({**CMD, "peak_memory_gib": -1}), MEASURE_CMD, "peak_memory_gib must be"),
    ("measure-jobs-file-bad-profile", jobs_file({**CMD, "profile": "nope.json"}), MEASURE_CMD, "nope.json: no such file"),
    ("measure-jobs-file-unknown-job", jobs_file(CMD), [*MEASURE_CMD, "--jobs", "mine,other"], "nor an entry of"),
    ("measure-jobs-file-one-job", jobs_file(CMD), MEASURE_CMD, "--sets pairs of 1 job(s) makes no set"),
    # ---- import: a collocation table
    ("import-missing", nothing, IMPORT, "t.csv: no such file"),
    ("import-dir", lambda w: (w / "t.csv").mkdir(), IMPORT, "t.csv: is a directory"),
    ("import-empty", table(head=""), IMPORT, "t.csv: empty file"),
    ("import-header-only", table(), IMPORT, "t.csv: holds no rows"),
    ("import-no-colo", table("s1,a,mps,10\n", "s1,b,mps,20\n", head="set_id,job,mode,solo_ms\n"), IMPORT, "missing column(s) colo_ms (or speed)"),
    ("import-no-set-id", table("a,mps,10,15\n", head="job,mode,solo_ms,colo_ms\n"), IMPORT, "missing column(s) set_id"),
    ("import-one-job-set", table(TABLE_A, TABLE_B.replace("s1", "s2")), IMPORT, "set 's1' (row 1) has one job"),
    ("import-negative-solo", table(TABLE_A.replace(",10,", ",-10,"), TABLE_B), IMPORT, "row 1: solo_ms is '-10'"),
    ("import-zero-colo", table(TABLE_A, TABLE_B.replace(",25,", ",0,")), IMPORT, "row 2: colo_ms is '0'"),
    ("import-inf-colo", table(TABLE_A, TABLE_B.replace(",25,", ",inf,")), IMPORT, "row 2: colo_ms is 'inf'"),
    ("import-not-a-number", table(TABLE_A.replace(",15,", ",fast,"), TABLE_B), IMPORT, "row 1: colo_ms is 'fast', not a number"),
    ("import-empty-solo", table(TABLE_A.replace(",10,", ",,"), TABLE_B), IMPORT, "row 1: solo_ms is empty"),
    ("import-mixed-gpus", table(TABLE_A, TABLE_B.replace(H100, "NVIDIA H200")), IMPORT, "mixes GPUs"),
    ("import-bad-mode", table(TABLE_A.replace(",mps,", ",shared,"), TABLE_B), IMPORT, "row 1: mode 'shared'"),
    ("import-mixed-modes", table(TABLE_A.replace(",mps,", ",timeslice,"), TABLE_B), IMPORT, "set 's1' mixes modes"),
    ("import-bad-job-name", table(TABLE_A.replace(",a,", ",a+c,"), TABLE_B), IMPORT, "row 1: job 'a+c' is not a usable name"),
    ("import-bad-time", table(TABLE_A, TABLE_B, head=TABLE_HEAD.replace("\n", ",started_at\n")) if False else
     write("t.csv", TABLE_HEAD.replace("\n", ",started_at\n") + TABLE_A.replace("\n", ",yesterday\n") + TABLE_B.replace("\n", ",\n")),
     IMPORT, "row 1: started_at 'yesterday' is not an ISO 8601 time"),
    ("import-speed-disagrees", write("t.csv", TABLE_HEAD.replace("\n", ",speed\n") + TABLE_A.replace("\n", ",0.9\n") + TABLE_B.replace("\n", ",\n")),
     IMPORT, "row 1: colo_ms 15 and speed 0.9 disagree"),
    ("import-no-profile", table("s1,a,mps,10,15\n", "s1,b,mps,20,25\n", head="set_id,job,mode,solo_ms,colo_ms\n"), IMPORT, "job a has no profile"),
    ("import-smi-lacks-memory-util", table("s1,a,mps,10,15,H,90 %\n", "s1,b,mps,20,25,H,80 %\n",
                                           head="set_id,job,mode,solo_ms,colo_ms,name,utilization.gpu [%]\n"),
     IMPORT, "job a lacks mem_util_pct"),
    ("import-profile-differs", table(TABLE_A, TABLE_B, TABLE_A.replace("s1", "s2").replace(",90,", ",70,"), TABLE_B.replace("s1", "s2")),
     IMPORT, "job a: gpu_util_pct differs between its rows (70, 90)"),
    ("import-util-over-100", table(TABLE_A.replace(",90,", ",190,"), TABLE_B), IMPORT, "row 1: gpu_util_pct is '190': more than 100"),
    ("import-unknown-gpu", table(TABLE_A.replace(H100, "Mystery GPU"), TABLE_B.replace(H100, "Mystery GPU")), IMPORT, "unknown GPU 'Mystery GPU'"),
    ("import-no-gpu", table("s1,a,mps,10,15,90,40,30\n", "s1,b,mps,20,25,80,30,20\n", head=TABLE_HEAD.replace(",gpu,", ",")), IMPORT,
     "no gpu column: give --gpu NAME"),
    ("import-gpu-disagrees", table(TABLE_A, TABLE_B), [*IMPORT, "--gpu", "NVIDIA H200"], "--gpu says 'NVIDIA H200'"),
    ("import-exists", lambda w: (table(TABLE_A, TABLE_B)(w), (w / "ds" / "campaigns" / "t").mkdir(parents=True)), IMPORT, "campaigns/t: already exists"),
    ("import-out-is-file", table(TABLE_A, TABLE_B), ["import", "{w}/t.csv", "--out", "{w}/afile"], "afile: is a file"),
    ("import-bad-name", table(TABLE_A, TABLE_B), [*IMPORT, "--name", "a/b"], "--name 'a/b'"),
    ("import-column-spec", table(TABLE_A, TABLE_B), [*IMPORT, "--column", "solo_ms"], "--column 'solo_ms': expected OURS=THEIRS"),
    ("import-column-unknown", table(TABLE_A, TABLE_B), [*IMPORT, "--column", "bogus=job"], "bogus is not a column of the format"),
    ("import-column-absent", table(TABLE_A, TABLE_B), [*IMPORT, "--column", "job=worker"], "the table has no column 'worker'"),
    ("import-profiles-missing", table(TABLE_A, TABLE_B), [*IMPORT, "--profiles", "{w}/nope"], "nope: no such folder of profiles"),
    ("import-profiles-file", table(TABLE_A, TABLE_B), [*IMPORT, "--profiles", "{w}/p1.json"], "p1.json: is a file: give the folder"),
    ("import-profiles-empty", table(TABLE_A, TABLE_B), [*IMPORT, "--profiles", "{w}/adir"], "adir: no profile JSON files"),
    ("import-parquet-engine", write("t.parquet", b"PAR1"), ["import", "{w}/t.parquet", "--out", "{w}/ds"], "t.parquet"),
    # ---- export
    ("export-missing", nothing, ["export", "{w}/nope", "-o", "{w}/out.csv"], "nope: no such file or directory"),
    ("export-over-input", nothing, ["export", "{w}/camp/windows.jsonl", "-o", "{w}/camp/windows.jsonl"], "is the input"),
    ("export-no-records", write("camp/windows.jsonl", ""), ["export", "{w}/camp", "-o", "{w}/out.csv"], "holds no window records"),
    ("export-out-dir", nothing, ["export", "{w}/camp", "-o", "{w}/adir"], "adir: the output is a directory"),
    ("export-xlsx", nothing, ["export", "{w}/camp", "-o", "{w}/out.xlsx"], "out.xlsx: the table is written as CSV or Parquet"),
]


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_bad_input_is_one_line_naming_it(world, capsys, case):
    name, setup, args, needle = case
    if args[-1] == "--":  # a case that must succeed: odd but readable input
        args = args[:-1]
    setup(world)
    before = snapshot(world)
    code = main([a.format(w=world) for a in args])
    out, err = capsys.readouterr()
    after = snapshot(world)
    changed = [f for f in before if after.get(f) != before[f]]
    assert not changed, f"{name}: files changed: {changed}"
    left = [f for f in after if f not in before and (".tmp" in f or f.startswith("."))]
    assert not left, f"{name}: temporary files left: {left}"
    assert "Traceback" not in err
    if needle is None:
        assert code == 0, err
        return
    lines = err.strip().splitlines()
    assert code != 0, f"{name}: exit 0 (stdout {out[:200]!r})"
    assert len(lines) == 1, f"{name}: {len(lines)} lines: {err[:500]}"
    assert lines[0].startswith("colopred: error:"), lines[0]
    assert needle in lines[0], f"{name}: {needle!r} not in {lines[0]!r}"
    assert not [f for f in after if f not in before and f.startswith(("out.json", "m/"))], f"{name}: an output was written"


def test_a_second_writer_on_a_campaign_is_refused(world, capsys):
    """While one measure holds the campaign's lock, another (here: --resume) is refused in one line naming the folder."""
    lock = open(world / "camp" / ".campaign.lock", "a+")
    fcntl.flock(lock.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
    try:
        before = snapshot(world / "camp")
        code = main(["measure", "--out", str(world / "camp"), "--resume", "--device", "cpu"])
        err = capsys.readouterr().err
        assert code != 0 and len(err.strip().splitlines()) == 1
        assert f"{world / 'camp'}: another colopred measure is writing this campaign" in err
        assert {k: v for k, v in snapshot(world / "camp").items() if k != ".campaign.lock"} == \
            {k: v for k, v in before.items() if k != ".campaign.lock"}
    finally:
        lock.close()
    code = main(["measure", "--out", str(world / "camp"), "--resume", "--device", "cpu"])  # lock released: resumes (nothing left to do)
    assert code == 0, capsys.readouterr().err


def test_cases_cover_every_command():
    commands = {tuple(a for a in c[2][:2] if not a.startswith("{")) for c in CASES}
    for cmd in [("profile", "ncu"), ("profile", "show"), ("profile", "retime"), ("profile", "overlap"), ("predict",), ("table",), ("calibrate",),
                ("train",), ("evaluate",), ("measure",), ("import",), ("export",)]:
        assert any(c[: len(cmd)] == cmd for c in commands), cmd
    assert len(CASES) >= 100

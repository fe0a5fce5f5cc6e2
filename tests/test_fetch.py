"""Tests of pfwcp_nb.fetch and the `pfwcp-data` command, against a local HTTP server on 127.0.0.1.

The server serves a folder built in tmp_path (a mirror of small fake files, archives built here: a zip with
hour.csv, a CIFAR-10 tarball in the python pickle format) and a path that announces a longer body than it
sends and closes the connection. The checksum table entries of the fake files are patched (monkeypatch)."""
import functools
import hashlib
import http.server
import io
import json
import os
import pickle
import subprocess
import sys
import tarfile
import threading
import zipfile
from pathlib import Path

import numpy as np
import pytest

from pfwcp_nb import data as D
from pfwcp_nb import fetch as F

ROOT = Path(__file__).resolve().parents[1]


class _Handler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass

    def do_GET(self):
        if self.path.startswith("/broken/"):             # a dropped connection: 100 of 100000 announced bytes
            self.send_response(200)
            self.send_header("Content-Length", "100000")
            self.end_headers()
            self.wfile.write(b"x" * 100)
            self.wfile.flush()
            self.close_connection = True
            return
        super().do_GET()


@pytest.fixture
def server(tmp_path, monkeypatch):
    "(base URL, served folder) of an HTTP server on 127.0.0.1 (a free port) for the test."
    monkeypatch.setenv("no_proxy", "*")
    root = tmp_path / "served"
    root.mkdir()
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(_Handler, directory=str(root)))
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}", root
    httpd.shutdown()
    httpd.server_close()


def _sha(b: bytes) -> str:
    return hashlib.sha256(b).hexdigest()


def _fake_mirror(folder: Path, monkeypatch) -> dict[str, bytes]:
    "Write one small fake file per needed file into `folder` and patch their digests into the table."
    files = {f: f"fake {f}\n".encode() * 3 for f in F.dataset_files()}
    for f, b in files.items():
        (folder / f).write_bytes(b)
        monkeypatch.setitem(F.SHA256, f, _sha(b))
    return files


def _leftovers(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir()) if folder.exists() else []


# ---------------------------------------------------------------- mirror

def test_mirror_fetch_then_rerun_skips_and_verify(server, tmp_path, monkeypatch, capsys):
    url, served = server
    files = _fake_mirror(served, monkeypatch)
    dest = tmp_path / "data"
    done = F.fetch(None, dest, mirror=url)
    assert set(done) == set(files) and all(v == f"downloaded from {url}/{f}" for f, v in done.items())
    assert {f: (dest / f).read_bytes() for f in files} == files
    assert _leftovers(dest) == sorted(files)                      # no temporary files left
    umask = os.umask(0); os.umask(umask)
    assert {(dest / f).stat().st_mode & 0o777 for f in files} == {0o666 & ~umask}   # not mkstemp's 0600
    assert set(F.fetch(None, dest, mirror=url).values()) == {"already verified"}
    capsys.readouterr()
    assert F.main(["verify", "--dest", str(dest)]) == 0
    out = capsys.readouterr().out
    assert all(f in out for f in files) and "mismatch" not in out and "missing" not in out
    # a damaged local file is fetched again; the others are skipped
    (dest / "hour.csv").write_bytes(b"damaged")
    assert F.main(["verify", "--dest", str(dest)]) == 1
    assert "hour.csv" in capsys.readouterr().err
    done = F.fetch(["bike", "airfoil"], dest, mirror=url)
    assert done == {"hour.csv": f"downloaded from {url}/hour.csv", "airfoil_self_noise.dat": "already verified"}
    assert (dest / "hour.csv").read_bytes() == files["hour.csv"]


def test_mirror_as_local_folder_via_cli(tmp_path, monkeypatch, capsys):
    mirror = tmp_path / "mirror"
    mirror.mkdir()
    files = _fake_mirror(mirror, monkeypatch)
    dest = tmp_path / "data"
    assert F.main(["fetch", "crime", "--mirror", str(mirror), "--dest", str(dest)]) == 0
    assert _leftovers(dest) == sorted(D.DATA_FILES["crime"])
    assert (dest / "communities.names").read_bytes() == files["communities.names"]


def test_extras_come_from_a_mirror_only(server, tmp_path, monkeypatch):
    "Concrete_Data.csv (no public original) is fetched from a mirror that has it; skipped, with a note, otherwise."
    url, served = server
    files = _fake_mirror(served, monkeypatch)
    csv = b"Cement,...,Strength\n540.0,...,79.99\n"
    monkeypatch.setitem(F.SHA256, "Concrete_Data.csv", _sha(csv))
    logs = []
    done = F.fetch(["concrete"], tmp_path / "a", mirror=url, log=logs.append)       # not on this mirror: a note
    assert done == {"Concrete_Data.xls": f"downloaded from {url}/Concrete_Data.xls"}
    assert any(s.startswith("Concrete_Data.csv: not fetched (optional, not on the mirror") for s in logs)
    (served / "Concrete_Data.csv").write_bytes(csv)                                    # on the mirror: fetched
    done = F.fetch(["concrete"], tmp_path / "a", mirror=url, log=logs.append)
    assert done["Concrete_Data.csv"] == f"downloaded from {url}/Concrete_Data.csv"
    assert (tmp_path / "a/Concrete_Data.csv").read_bytes() == csv and F.check_file(tmp_path / "a/Concrete_Data.csv")[0]
    (served / "Concrete_Data.csv").write_bytes(b"a different export\n")               # a wrong copy still fails
    with pytest.raises(F.FetchError, match="Concrete_Data.csv: SHA256 mismatch.*replace it on the mirror"):
        F.fetch(["concrete"], tmp_path / "b", mirror=url, log=logs.append)
    assert _leftovers(tmp_path / "b") == ["Concrete_Data.xls"]
    monkeypatch.setitem(F.ORIGINALS, "Concrete_Data.xls", F.Source(f"{url}/Concrete_Data.xls"))
    logs.clear()                                                                       # no mirror: the originals only
    assert set(F.fetch(["concrete"], tmp_path / "c", log=logs.append)) == {"Concrete_Data.xls"}
    assert "Concrete_Data.csv: not fetched (optional, no loader reads it; no public original: only a --mirror has it)" in logs
    assert set(F.EXTRAS) <= set(D.DATA_FILES) and all(f in F.SHA256 and f not in F.ORIGINALS
                                                      for fs in F.EXTRAS.values() for f in fs)


def test_checksum_hint_depends_on_the_source(server, tmp_path, monkeypatch):
    url, served = server
    (served / "CASP.csv").write_bytes(b"not the shipped file\n")
    with pytest.raises(F.FetchError) as e:
        F.fetch_file("CASP.csv", tmp_path / "m", mirror=url)
    assert "The mirror's copy differs from the checksum this release ships: replace it on the mirror" in str(e.value)
    assert "--mirror URL" not in str(e.value)
    monkeypatch.setitem(F.ORIGINALS, "CASP.csv", F.Source(f"{url}/CASP.csv"))
    with pytest.raises(F.FetchError) as e:
        F.fetch_file("CASP.csv", tmp_path / "o")
    assert "If the public file changed, fetch a prepared copy with --mirror URL." in str(e.value)
    assert "replace it on the mirror" not in str(e.value)


# ---------------------------------------------------------------- originals: archives, text fixes, CIFAR

def _cifar_tarball(path: Path, per_class: int, seed: int = 0, test_batch=None):
    "A CIFAR-10 python tarball with `per_class` test images per class in shuffled order; (labels, data)."
    rng = np.random.default_rng(seed)
    labels = rng.permutation(np.repeat(np.arange(10), per_class))
    data = rng.integers(0, 256, size=(len(labels), 3072), dtype=np.uint8)
    test = {b"batch_label": b"testing batch 1 of 1", b"labels": labels.tolist(), b"data": data,
            b"filenames": [f"img_{i}.png".encode() for i in range(len(labels))]}
    meta = {b"label_names": [c.encode() for c in F.CIFAR_CLASSES], b"num_cases_per_batch": len(labels),
            b"num_vis": 3072}
    with tarfile.open(path, "w:gz") as tf:
        for name, blob in [("batches.meta", pickle.dumps(meta, protocol=2)),
                           ("test_batch", test_batch or pickle.dumps(test, protocol=2)),
                           ("readme.html", b"<html></html>")]:
            info = tarfile.TarInfo(f"cifar-10-batches-py/{name}")
            info.size = len(blob)
            tf.addfile(info, io.BytesIO(blob))
    return labels, data


def test_originals_zip_text_fixes_and_cifar_conversion(server, tmp_path, monkeypatch):
    url, served = server
    rng = np.random.default_rng(1)
    # airfoil as a public copy with a header line and LF endings; the shipped digest is the CRLF headerless form
    rows = rng.uniform(1, 100, size=(30, 6))
    crlf = "".join("\t".join(f"{v:.4f}" for v in r) + "\r\n" for r in rows).encode()
    (served / "airfoil.dat").write_bytes(b"f\ta\tc\tv\tt\tspl\n" + crlf.replace(b"\r\n", b"\n"))
    # bike: hour.csv inside a zip archive, next to other files
    hour = b"instant,cnt\r\n1,16\r\n2,40\r\n"
    with zipfile.ZipFile(served / "Bike-Sharing-Dataset.zip", "w") as zf:
        zf.writestr("Readme.txt", "bike sharing")
        zf.writestr("Bike-Sharing-Dataset/day.csv", "instant,cnt\n1,985\n")
        zf.writestr("Bike-Sharing-Dataset/hour.csv", hour)
    star = b'"","gender"\n"1","female"\n'
    (served / "STAR.csv").write_bytes(b'"rownames","gender"\n"1","female"\n')
    labels, pixels = _cifar_tarball(served / "cifar.tar.gz", per_class=2)
    monkeypatch.setattr(F, "CIFAR_PER_CLASS", 2)
    monkeypatch.setitem(F.MD5, F.CIFAR_TARBALL, hashlib.md5((served / "cifar.tar.gz").read_bytes()).hexdigest())
    for name, src, body in [("airfoil_self_noise.dat", F.Source(f"{url}/airfoil.dat", prepare="crlf"), crlf),
                            ("hour.csv", F.Source(f"{url}/Bike-Sharing-Dataset.zip", member="hour.csv"), hour),
                            ("STAR.csv", F.Source(f"{url}/STAR.csv", prepare="star"), star)]:
        monkeypatch.setitem(F.ORIGINALS, name, src)
        monkeypatch.setitem(F.SHA256, name, _sha(body))
    monkeypatch.setitem(F.ORIGINALS, F.CIFAR_NPZ, F.Source(f"{url}/cifar.tar.gz", prepare="cifar"))

    dest = tmp_path / "data"
    done = F.fetch(["airfoil", "bike", "star", "cifar10c"], dest)
    assert done["cifar10_test.npz"].startswith("converted from") and done["hour.csv"].startswith("downloaded from")
    assert (dest / "airfoil_self_noise.dat").read_bytes() == crlf
    assert (dest / "hour.csv").read_bytes() == hour and (dest / "STAR.csv").read_bytes() == star
    assert _leftovers(dest) == sorted(["airfoil_self_noise.dat", "hour.csv", "STAR.csv", "cifar10_test.npz",
                                       "cifar10_test.npz.source.json"])
    # the npz: same keys/dtypes as the loader expects, lossless pixels, class-major order
    order = np.argsort(labels, kind="stable")
    with np.load(dest / "cifar10_test.npz") as z:
        assert sorted(z.files) == ["classes", "images", "labels"]
        assert z["images"].dtype == np.uint8 and z["images"].shape == (20, 32, 32, 3)
        assert z["labels"].dtype == np.int64 and list(z["classes"]) == list(F.CIFAR_CLASSES)
        np.testing.assert_array_equal(z["labels"], np.repeat(np.arange(10), 2))
        np.testing.assert_array_equal(z["images"], pixels.reshape(-1, 3, 32, 32).transpose(0, 2, 3, 1)[order])
    # channels: the first 1024 values of a row are the red plane
    i = order[0]
    with np.load(dest / "cifar10_test.npz") as z:
        np.testing.assert_array_equal(z["images"][0, :, :, 0].ravel(), pixels[i, :1024])
    X, y = D.load_dataset("cifar10c", data_dir=dest)
    assert X.shape == (20, 3072) and list(y) == list(np.repeat(np.arange(10), 2))
    X, y = D.load_dataset("airfoil", data_dir=dest)
    np.testing.assert_allclose(y, np.round(rows[:, 5], 4))
    ok, status = F.check_file(dest / "cifar10_test.npz")
    assert ok and "converted from cifar-10-python.tar.gz" in status
    record = json.loads((dest / "cifar10_test.npz.source.json").read_text())
    assert record["sha256"] == F.file_digest(dest / "cifar10_test.npz")
    # re-running downloads nothing (the server's files are gone)
    for p in served.iterdir():
        p.unlink()
    assert set(F.fetch(["airfoil", "bike", "star", "cifar10c"], dest).values()) == {"already verified"}
    # a changed npz no longer matches its record
    with np.load(dest / "cifar10_test.npz") as z:
        arrays = {k: z[k] for k in z.files}
    arrays["images"][0, 0, 0, 0] ^= 1
    np.savez_compressed(dest / "cifar10_test.npz", **arrays)
    assert not F.check_file(dest / "cifar10_test.npz")[0]


def test_cifar_md5_mismatch_names_both_digests(server, tmp_path, monkeypatch):
    url, served = server
    _cifar_tarball(served / "cifar.tar.gz", per_class=2)
    monkeypatch.setitem(F.ORIGINALS, F.CIFAR_NPZ, F.Source(f"{url}/cifar.tar.gz", prepare="cifar"))
    got = hashlib.md5((served / "cifar.tar.gz").read_bytes()).hexdigest()
    dest = tmp_path / "data"
    with pytest.raises(F.FetchError) as e:
        F.fetch(["cifar10c"], dest)
    msg = str(e.value)
    assert "cifar-10-python.tar.gz" in msg and "c58f30108f718f92721af3b95e74349a" in msg and got in msg
    assert _leftovers(dest) == []


def test_cifar_tarball_with_foreign_pickle_is_refused(server, tmp_path, monkeypatch):
    "The batch unpickler accepts numpy arrays only: a pickle that would call os.system is an error, not a command."
    url, served = server
    marker = tmp_path / "pwned"

    class Evil:
        def __reduce__(self):
            return (os.system, (f"touch {marker}",))
    _cifar_tarball(served / "cifar.tar.gz", per_class=2, test_batch=pickle.dumps({b"data": Evil()}, protocol=2))
    monkeypatch.setitem(F.MD5, F.CIFAR_TARBALL, hashlib.md5((served / "cifar.tar.gz").read_bytes()).hexdigest())
    monkeypatch.setitem(F.ORIGINALS, F.CIFAR_NPZ, F.Source(f"{url}/cifar.tar.gz", prepare="cifar"))
    dest = tmp_path / "data"
    with pytest.raises(F.FetchError, match="cifar10_test.npz.*system"):
        F.fetch(["cifar10c"], dest)
    assert not marker.exists() and _leftovers(dest) == []


def test_cifar_wrong_layout_is_refused(server, tmp_path, monkeypatch):
    url, served = server
    _cifar_tarball(served / "cifar.tar.gz", per_class=3)          # 30 images, but 2 per class expected
    monkeypatch.setattr(F, "CIFAR_PER_CLASS", 2)
    monkeypatch.setitem(F.MD5, F.CIFAR_TARBALL, hashlib.md5((served / "cifar.tar.gz").read_bytes()).hexdigest())
    monkeypatch.setitem(F.ORIGINALS, F.CIFAR_NPZ, F.Source(f"{url}/cifar.tar.gz", prepare="cifar"))
    with pytest.raises(F.FetchError, match="not the CIFAR-10 test set layout"):
        F.fetch(["cifar10c"], tmp_path / "data")
    assert _leftovers(tmp_path / "data") == []


def test_zip_without_the_member(server, tmp_path, monkeypatch):
    url, served = server
    with zipfile.ZipFile(served / "bike.zip", "w") as zf:
        zf.writestr("day.csv", "x")
    monkeypatch.setitem(F.ORIGINALS, "hour.csv", F.Source(f"{url}/bike.zip", member="hour.csv"))
    with pytest.raises(F.FetchError, match="hour.csv: expected one 'hour.csv' in the archive"):
        F.fetch(["bike"], tmp_path / "data")
    assert _leftovers(tmp_path / "data") == []


# ---------------------------------------------------------------- failures leave nothing behind

def test_corrupted_file_names_file_and_both_checksums(server, tmp_path, monkeypatch, capsys):
    url, served = server
    _fake_mirror(served, monkeypatch)
    (served / "CASP.csv").write_bytes(b"corrupted on the mirror\n")
    got = _sha(b"corrupted on the mirror\n")
    dest = tmp_path / "data"
    with pytest.raises(F.FetchError) as e:
        F.fetch(["protein"], dest, mirror=url)
    msg = str(e.value)
    assert "CASP.csv" in msg and F.SHA256["CASP.csv"] in msg and got in msg
    assert _leftovers(dest) == []
    # the command: exit 1, the same message, no traceback; the other files are still fetched
    assert F.main(["fetch", "--dest", str(dest), "--mirror", url]) == 1
    err = capsys.readouterr().err
    assert err.startswith("pfwcp-data: error: CASP.csv") and got in err and "Traceback" not in err
    assert _leftovers(dest) == sorted(f for f in F.dataset_files() if f != "CASP.csv")
    # an existing (wrong) file is not replaced by a download that fails its check
    (dest / "CASP.csv").write_bytes(b"old")
    assert F.main(["fetch", "protein", "--dest", str(dest), "--mirror", url]) == 1
    assert (dest / "CASP.csv").read_bytes() == b"old"


@pytest.mark.parametrize("mode", ["original", "mirror"])
def test_dropped_connection_leaves_no_partial_file(server, tmp_path, monkeypatch, mode):
    url, _ = server
    monkeypatch.setitem(F.ORIGINALS, "CASP.csv", F.Source(f"{url}/broken/CASP.csv"))
    dest = tmp_path / "data"
    with pytest.raises(F.FetchError, match=r"CASP.csv: the connection to .* closed after 100 of 100000 bytes"):
        F.fetch(["protein"], dest, mirror=f"{url}/broken" if mode == "mirror" else None)
    assert _leftovers(dest) == []


def test_unreachable_server_and_missing_file(server, tmp_path, monkeypatch):
    url, _ = server
    with pytest.raises(F.FetchError, match="CASP.csv: download from .*/CASP.csv failed: HTTP Error 404"):
        F.fetch(["protein"], tmp_path / "data", mirror=url)
    monkeypatch.setitem(F.ORIGINALS, "CASP.csv", F.Source("http://127.0.0.1:9/CASP.csv"))   # discard port
    with pytest.raises(F.FetchError, match="CASP.csv: download from http://127.0.0.1:9/CASP.csv failed"):
        F.fetch(["protein"], tmp_path / "data")
    assert _leftovers(tmp_path / "data") == []


# ---------------------------------------------------------------- progress bar

def test_progress_bar_only_when_asked_or_on_a_terminal(server, tmp_path, monkeypatch, capsys):
    url, served = server
    _fake_mirror(served, monkeypatch)
    F.fetch(["protein"], tmp_path / "a", mirror=url, log=lambda s: None)        # stderr is not a terminal here
    assert capsys.readouterr().err == ""
    F.fetch(["protein"], tmp_path / "b", mirror=url, progress=True, log=lambda s: None)
    assert "CASP.csv" in capsys.readouterr().err


# ---------------------------------------------------------------- list, verify, test-flags

def test_list_and_verify_on_an_empty_folder(tmp_path, capsys):
    assert F.main(["list", "--dest", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    for f in F.dataset_files():
        assert f in out and F.ORIGINALS[f].url in out
    assert out.count("missing") == len(F.dataset_files())
    assert F.main(["verify", "star", "--dest", str(tmp_path)]) == 1
    cap = capsys.readouterr()
    assert "STAR.csv" in cap.out and "CASP.csv" not in cap.out
    assert "pfwcp-data fetch" in cap.err and "Traceback" not in cap.err


def test_verify_checks_extra_known_files_when_present(tmp_path, monkeypatch, capsys):
    _fake_mirror(tmp_path, monkeypatch)
    assert F.main(["verify", "--dest", str(tmp_path)]) == 0
    (tmp_path / "Concrete_Data.csv").write_bytes(b"not the CSV export")
    assert F.main(["verify", "--dest", str(tmp_path)]) == 1
    assert "Concrete_Data.csv" in capsys.readouterr().err


def test_test_flags(tmp_path, monkeypatch, capsys):
    monkeypatch.delenv("PFWCP_REQUIRE_DATA", raising=False)
    monkeypatch.setenv("PFWCP_DATA_DIR", str(tmp_path))
    assert F.main(["test-flags"]) == 0
    cap = capsys.readouterr()
    assert cap.out == "" and "skipped" in cap.err and "pfwcp-data fetch" in cap.err and str(tmp_path) in cap.err
    _fake_mirror(tmp_path, monkeypatch)
    assert F.main(["test-flags"]) == 0
    assert capsys.readouterr().out == "data\n"
    (tmp_path / "STAR.csv").write_bytes(b"wrong")                 # one file fails its check: no flag
    assert F.main(["test-flags"]) == 0
    assert capsys.readouterr().out == ""
    monkeypatch.setenv("PFWCP_REQUIRE_DATA", "1")                  # required: the cells run (and fail loudly)
    assert F.main(["test-flags", "--dest", str(tmp_path / "nowhere")]) == 0
    assert capsys.readouterr().out == "data\n"


@pytest.mark.parametrize("value", ["data", "./rel/data", None])
def test_test_flags_refuses_a_relative_data_dir(tmp_path, monkeypatch, capsys, value):
    "nbdev_test runs the notebooks from nbs/: a relative (or unset) PFWCP_DATA_DIR names another folder there."
    monkeypatch.chdir(tmp_path)
    folder = tmp_path / (value or "data")
    folder.mkdir(parents=True)
    _fake_mirror(folder, monkeypatch)                              # the files are there, seen from here
    monkeypatch.delenv("PFWCP_REQUIRE_DATA", raising=False)
    if value is None:
        monkeypatch.delenv("PFWCP_DATA_DIR", raising=False)
    else:
        monkeypatch.setenv("PFWCP_DATA_DIR", value)
    assert F.main(["test-flags"]) == 0
    cap = capsys.readouterr()
    assert cap.out == "" and "must be absolute" in cap.err and "skipped" in cap.err and str(folder.resolve()) in cap.err
    monkeypatch.setenv("PFWCP_REQUIRE_DATA", "1")                  # required: the flag, and the warning
    assert F.main(["test-flags"]) == 0
    cap = capsys.readouterr()
    assert cap.out == "data\n" and "must be absolute" in cap.err and "may fail" in cap.err
    monkeypatch.delenv("PFWCP_REQUIRE_DATA")
    monkeypatch.setenv("PFWCP_DATA_DIR", str(folder.resolve()))   # the same folder, absolute: the flag, silently
    assert F.main(["test-flags"]) == 0
    cap = capsys.readouterr()
    assert cap.out == "data\n" and cap.err == ""


# ---------------------------------------------------------------- the command in a subprocess

def _run(args, env_extra=None, script=None):
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    env.pop("PFWCP_REQUIRE_DATA", None)
    env.update(env_extra or {})
    cmd = [sys.executable, str(script)] if script else [sys.executable, "-m", "pfwcp_nb.fetch"]
    return subprocess.run(cmd + args, capture_output=True, text=True, env=env, timeout=120)


@pytest.mark.parametrize("args,needle", [
    ([], "the following arguments are required: COMMAND"),
    (["download"], "invalid choice: 'download'"),
    (["fetch", "mnist"], "unknown dataset 'mnist'"),
    (["fetch", "--mirror", "ftp://example.org/data"], "neither an http(s)/file URL nor an existing folder"),
    (["verify", "--bogus"], "unrecognized arguments: --bogus"),
    (["test-flags", "airfoil"], "unrecognized arguments: airfoil"),
])
@pytest.mark.slow
def test_bad_arguments_exit_2_with_usage(args, needle):
    r = _run(args)
    assert r.returncode == 2 and r.stderr.startswith("usage: pfwcp-data") and needle in r.stderr
    assert "Traceback" not in r.stderr


@pytest.mark.slow
def test_console_script_form(tmp_path):
    "The wrapper pip writes for `pfwcp-data=pfwcp_nb.fetch:main` passes main's return value to sys.exit."
    wrapper = tmp_path / "pfwcp-data"
    wrapper.write_text("import sys\nfrom pfwcp_nb.fetch import main\nif __name__ == '__main__':\n    sys.exit(main())\n")
    r = _run(["test-flags"], {"PFWCP_DATA_DIR": str(tmp_path / "none")}, script=wrapper)
    assert r.returncode == 0 and r.stdout == "" and "pfwcp-data fetch" in r.stderr
    r = _run(["test-flags"], {"PFWCP_DATA_DIR": str(tmp_path / "none"), "PFWCP_REQUIRE_DATA": "1"}, script=wrapper)
    assert r.returncode == 0 and r.stdout == "data\n"
    r = _run(["verify", "--dest", str(tmp_path / "none")], script=wrapper)
    assert r.returncode == 1 and "missing" in r.stdout and "Traceback" not in r.stderr
    r = _run(["--help"], script=wrapper)
    assert r.returncode == 0 and all(c in r.stdout for c in ("list", "fetch", "verify", "test-flags"))


def test_checksum_table_ships_with_the_package():
    table = json.loads((Path(F.__file__).parent / F.CHECKSUM_FILE).read_text())
    assert table["sha256"] == F.SHA256 and table["md5"] == {"cifar-10-python.tar.gz": "c58f30108f718f92721af3b95e74349a"}
    assert all(len(v) == 64 for v in F.SHA256.values())
    manifest = (ROOT / "MANIFEST.in").read_text()
    assert f"pfwcp_nb/{F.CHECKSUM_FILE}" in manifest


def test_test_flags_on_the_real_data(data_dir):
    "On a data directory with the real files (shared folder or a fetched one), test-flags turns the data cells on."
    r = _run(["test-flags"], {"PFWCP_DATA_DIR": str(data_dir)})
    assert r.returncode == 0 and r.stdout == "data\n", r.stderr

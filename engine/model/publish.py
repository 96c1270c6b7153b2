"""Publishing a build: a temporary directory beside the final one (those of killed builds removed), a progress
bar on stderr, and one rename into place."""

from __future__ import annotations

import errno
import logging
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from engine.model.export import BuildError

log = logging.getLogger("flint.build")


def _progress(total: int, desc: str) -> Any:
    try:
        from tqdm import tqdm

        return tqdm(total=total, desc=desc, unit="step", file=sys.stderr, leave=True)
    except ImportError:  # pragma: no cover
        class _Null:
            def update(self, n: int = 1) -> None: ...
            def set_description_str(self, s: str) -> None:
                log.info("%s", s)
            def close(self) -> None: ...

        return _Null()


def _atomic_replace_dir(tmp: Path, final: Path) -> None:
    """Move a finished build into place. The old directory (if any) is moved aside first."""
    if final.exists():
        trash = final.with_name(f".old-{final.name}-{os.getpid()}-{int(time.time())}")
        os.replace(final, trash)
        os.replace(tmp, final)
        shutil.rmtree(trash, ignore_errors=True)
    else:
        os.replace(tmp, final)


def _build_tmp(final: Path) -> Path:
    """A temporary build directory beside ``final`` named with this process's id; those of builds whose process
    is gone (killed mid-way) are removed first: they are Flint's own and nothing reads them."""
    final.parent.mkdir(parents=True, exist_ok=True)
    for old in final.parent.glob(".build-*"):
        pid = old.name.split("-pid")[-1].split("-")[0] if "-pid" in old.name else ""
        if pid.isdigit() and not process_alive(int(pid)):
            shutil.rmtree(old, ignore_errors=True)
    return Path(tempfile.mkdtemp(dir=final.parent, prefix=f".build-{final.name}-pid{os.getpid()}-"))


def process_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


@contextmanager
def building(final: Path, bar: Any) -> Iterator[Path]:
    """A temporary directory to build ``final`` in (``_build_tmp``): removed, whatever ends the build early, a
    full disk said plainly; the progress bar closed either way. The caller publishes it (``_atomic_replace_dir``)."""
    tmp = _build_tmp(final)
    try:
        yield tmp
    except OSError as e:
        shutil.rmtree(tmp, ignore_errors=True)
        if e.errno == errno.ENOSPC:
            raise BuildError(f"no space left on the device holding {final.parent} while building {final.name}: "
                             "nothing was kept; free some space and run the build again") from e
        raise
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    finally:
        bar.close()

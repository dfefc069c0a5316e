"""Landlock (Linux >= 5.13) through ctypes: restrict the calling process (and everything it later
starts) to a list of directory trees, with no network and no signals to processes outside the sandbox.

Used by the sandbox child (`_child.py`) before any student code runs. Standard library only, because it
is imported by the child harness before ``sys.path`` is set up. Every function degrades gracefully:
`abi_version()` returns 0 where Landlock is missing, and `restrict()` then does nothing and says so.
"""
from __future__ import annotations

import ctypes
import os
import platform

# The syscall numbers are the same on every architecture (they were added after the unification).
_SYS_CREATE_RULESET, _SYS_ADD_RULE, _SYS_RESTRICT_SELF = 444, 445, 446
_CREATE_RULESET_VERSION = 1 << 0
_RULE_PATH_BENEATH = 1
_PR_SET_NO_NEW_PRIVS = 38

# Filesystem rights (bit i was added in the ABI noted in the comment).
EXECUTE, WRITE_FILE, READ_FILE, READ_DIR = 1 << 0, 1 << 1, 1 << 2, 1 << 3
REMOVE_DIR, REMOVE_FILE, MAKE_CHAR, MAKE_DIR = 1 << 4, 1 << 5, 1 << 6, 1 << 7
MAKE_REG, MAKE_SOCK, MAKE_FIFO, MAKE_BLOCK, MAKE_SYM = 1 << 8, 1 << 9, 1 << 10, 1 << 11, 1 << 12
REFER = 1 << 13        # ABI 2
TRUNCATE = 1 << 14     # ABI 3
IOCTL_DEV = 1 << 15    # ABI 5
_FS_BY_ABI = {1: (1 << 13) - 1, 2: (1 << 14) - 1, 3: (1 << 15) - 1, 4: (1 << 15) - 1}
_NET_ALL = (1 << 0) | (1 << 1)            # bind / connect TCP (ABI 4)
_SCOPE_ALL = (1 << 0) | (1 << 1)          # abstract unix sockets, signals (ABI 6)

READ = READ_FILE | READ_DIR
READ_EXEC = READ | EXECUTE
WRITE = (WRITE_FILE | REMOVE_DIR | REMOVE_FILE | MAKE_DIR | MAKE_REG | MAKE_SYM | MAKE_FIFO
         | MAKE_SOCK | REFER | TRUNCATE)
#: A write-only drop box: files can be created and written, but the directory cannot be listed.
DROPBOX = WRITE_FILE | MAKE_REG | TRUNCATE


class _RulesetAttr(ctypes.Structure):
    _fields_ = [("handled_access_fs", ctypes.c_uint64), ("handled_access_net", ctypes.c_uint64),
                ("scoped", ctypes.c_uint64)]


class _PathBeneath(ctypes.Structure):
    _pack_ = 1
    _fields_ = [("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32)]


def _libc():
    return ctypes.CDLL(None, use_errno=True)


def abi_version() -> int:
    """The kernel's Landlock ABI version, or 0 where Landlock is unavailable."""
    if platform.system() != "Linux":
        return 0
    try:
        libc = _libc()
        libc.syscall.restype = ctypes.c_long
        v = libc.syscall(ctypes.c_long(_SYS_CREATE_RULESET), None, ctypes.c_size_t(0),
                         ctypes.c_uint32(_CREATE_RULESET_VERSION))
        return max(int(v), 0)
    except Exception:
        return 0


def _fs_mask(abi: int) -> int:
    return _FS_BY_ABI.get(abi, (1 << 16) - 1)


def restrict(rules: list[tuple[str, int]]) -> str:
    """Allow only `rules` ((path, rights) pairs) from now on, deny TCP and outside signals.

    Returns a one-line description of what was enforced ("landlock ABI 7: 9 paths" or why not).
    Paths that do not exist are skipped. Raises OSError if the kernel refuses a step after the ruleset
    was created (the caller treats that as a sandbox failure, not as "no landlock").
    """
    abi = abi_version()
    if abi <= 0:
        return "landlock unavailable"
    libc = _libc()
    libc.syscall.restype = ctypes.c_long
    libc.prctl.restype = ctypes.c_int
    fs = _fs_mask(abi)
    attr = _RulesetAttr(fs, _NET_ALL if abi >= 4 else 0, _SCOPE_ALL if abi >= 6 else 0)
    size = ctypes.sizeof(_RulesetAttr) if abi >= 6 else (16 if abi >= 4 else 8)
    fd = libc.syscall(ctypes.c_long(_SYS_CREATE_RULESET), ctypes.byref(attr), ctypes.c_size_t(size),
                      ctypes.c_uint32(0))
    if fd < 0:
        e = ctypes.get_errno()
        raise OSError(e, f"landlock_create_ruleset: {os.strerror(e)}")
    added = 0
    try:
        for path, rights in rules:
            try:
                pfd = os.open(path, os.O_PATH | os.O_CLOEXEC)
            except OSError:
                continue
            try:
                allowed = rights & fs
                if not os.path.isdir(path):   # only file rights make sense on a file
                    allowed &= EXECUTE | WRITE_FILE | READ_FILE | TRUNCATE | IOCTL_DEV
                rule = _PathBeneath(allowed, pfd)
                r = libc.syscall(ctypes.c_long(_SYS_ADD_RULE), ctypes.c_int(fd),
                                 ctypes.c_int(_RULE_PATH_BENEATH), ctypes.byref(rule), ctypes.c_uint32(0))
                if r < 0:
                    e = ctypes.get_errno()
                    raise OSError(e, f"landlock_add_rule({path}): {os.strerror(e)}")
                added += 1
            finally:
                os.close(pfd)
        if libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
            e = ctypes.get_errno()
            raise OSError(e, f"prctl(NO_NEW_PRIVS): {os.strerror(e)}")
        r = libc.syscall(ctypes.c_long(_SYS_RESTRICT_SELF), ctypes.c_int(fd), ctypes.c_uint32(0))
        if r < 0:
            e = ctypes.get_errno()
            raise OSError(e, f"landlock_restrict_self: {os.strerror(e)}")
    finally:
        os.close(fd)
    return f"landlock ABI {abi}: {added} paths"

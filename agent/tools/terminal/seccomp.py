"""The seccomp filter every sandboxed command runs under: the kernel's keyrings are closed.

Keyrings are not namespaced: a session keyring is inherited across fork, exec and every
namespace bubblewrap makes, so a command could read what the server's session keeps there
(Kerberos tickets, fscrypt and ecryptfs keys, what `keyctl` tools store). Docker's default
profile refuses the same three system calls for the same reason. Refused with EPERM, as when a
keyring is not permitted, so programs that try one (a Kerberos library) fall back instead of
crashing.

A classic BPF program, built here rather than through libseccomp, since it is short: check the
architecture the call was made for (a 64-bit process may make 32-bit calls, with other
numbers), then the call's number. It is handed to bubblewrap (`--seccomp FD`), which installs it
just before it runs the command.
"""

import os
import platform
import struct
from dataclasses import dataclass

# Linux's audit architecture ids (linux/audit.h) and the numbers of add_key, request_key and
# keyctl for each (the syscall tables of each architecture).
_KEYRING_CALLS = {
    0xC000003E: (248, 249, 250),  # x86_64
    0x40000003: (286, 287, 288),  # i386, also under x86_64
    0xC00000B7: (217, 218, 219),  # aarch64
    0x40000028: (309, 310, 311),  # arm, also under aarch64
    0xC00000F3: (217, 218, 219),  # riscv64
    0xC0000015: (269, 270, 271),  # ppc64le
    0x80000016: (278, 279, 280),  # s390x
}
# x32 calls come under the x86_64 architecture with this bit set in their number.
_X32_BIT = 0x40000000
# The architectures a process on each machine may make calls for (`platform.machine()`).
_MACHINES = {
    "x86_64": (0xC000003E, 0x40000003),
    "aarch64": (0xC00000B7, 0x40000028),
    "riscv64": (0xC00000F3,),
    "ppc64le": (0xC0000015,),
    "s390x": (0x80000016,),
}

# BPF opcodes and seccomp return values (linux/filter.h, linux/seccomp.h).
_LD_W_ABS = 0x20
_JEQ_K = 0x15
_RET_K = 0x06
_RET_ALLOW = 0x7FFF0000
_RET_ERRNO = 0x00050000
# Offsets in struct seccomp_data.
_NR, _ARCH = 0, 4


@dataclass(frozen=True)
class _Op:
    code: int
    true: int = 0
    false: int = 0
    k: int = 0

    def pack(self) -> bytes:
        return struct.pack("=HBBI", self.code, self.true, self.false, self.k)


def keyring_filter(machine: str | None = None) -> bytes | None:
    """The program for this machine, or None where its architectures are not known here (the
    command then runs without the filter: refusing every call would break it)."""
    arches = _MACHINES.get(machine or platform.machine())
    if arches is None:
        return None
    denied = _RET_ERRNO | 1  # EPERM
    ops = [_Op(_LD_W_ABS, k=_ARCH)]
    blocks: list[list[_Op]] = []
    for arch in arches:
        numbers = list(_KEYRING_CALLS[arch])
        if arch == 0xC000003E:
            numbers += [number | _X32_BIT for number in numbers]
        # On this architecture: load the number, refuse a keyring call, allow the rest.
        block = [_Op(_LD_W_ABS, k=_NR)]
        for index, number in enumerate(numbers):
            block.append(_Op(_JEQ_K, true=len(numbers) - index, k=number))
        block += [_Op(_RET_K, k=_RET_ALLOW), _Op(_RET_K, k=denied)]
        blocks.append(block)
    # Dispatch: one comparison per architecture jumping to its block; an architecture the
    # machine does not run is allowed through untouched (the kernel refuses such calls).
    dispatch_length = len(arches) + 1
    offset = 0
    for index, arch in enumerate(arches):
        skip = dispatch_length - index - 1 + offset
        ops.append(_Op(_JEQ_K, true=skip, k=arch))
        offset += len(blocks[index])
    ops.append(_Op(_RET_K, k=_RET_ALLOW))
    for block in blocks:
        ops += block
    return b"".join(op.pack() for op in ops)


def filter_fd(program: bytes) -> int:
    """A pipe's reading end holding `program`, inheritable, for `bwrap --seccomp FD` (the
    program, a few hundred bytes, fits the pipe's buffer). The caller closes it once the
    sandbox has started."""
    read, write = os.pipe()
    try:
        os.write(write, program)
    finally:
        os.close(write)
    os.set_inheritable(read, True)
    return read

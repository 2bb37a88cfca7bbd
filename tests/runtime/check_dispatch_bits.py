#!/usr/bin/env python3
"""check_dispatch_bits.py: libqkv_kernels gives the bits of header-only builds (dispatch_bits.cpp).

  check_dispatch_bits.py V3_PROGRAM V4_PROGRAM LIBRARY_PROGRAM [LIBQKV_KERNELS LIBQKV_KERNELS_AVX512]

V3_PROGRAM and V4_PROGRAM are dispatch_bits.cpp compiled header-only for -march=x86-64-v3 and
-march=x86-64-v4; LIBRARY_PROGRAM the same source linked with libqkv_kernels. Checks:
  - the library under QKV_KERNELS=avx2 runs the avx2 kernels and prints V3_PROGRAM's lines;
  - by default it runs avx512 on a CPU with avx512f/bw/dq/vl and prints V4_PROGRAM's lines,
    else avx2 and V3_PROGRAM's lines (V4_PROGRAM is then not run: it would stop with SIGILL);
  - V3 and V4 differ in at least one line, so the comparison can tell the two tables apart;
  - with the two libraries (and objdump): libqkv_kernels.so and LIBRARY_PROGRAM hold no AVX-512
    instruction (no zmm, mask or upper-16 vector register, no EVEX-only mnemonic), so they run on
    any x86-64-v3 CPU, and libqkv_kernels_avx512.so does hold them (the check can see them).
"""
import re
import shutil
import os
import subprocess
import sys


def run(program, **env):
    out = subprocess.run([program], capture_output=True, text=True, check=False,
                         env={**os.environ, **env}, timeout=300)
    if out.returncode != 0:
        sys.exit(f"{program} exited {out.returncode}:\n{out.stdout}{out.stderr}")
    first, *rest = out.stdout.splitlines()
    return first, rest


def cpu_has_avx512():
    with open("/proc/cpuinfo") as f:
        flags = next((l.split(":", 1)[1].split() for l in f if l.startswith("flags")), [])
    return all(x in flags for x in ("avx512f", "avx512bw", "avx512dq", "avx512vl"))


def same(name_a, a, name_b, b):
    if a != b:
        diff = [f"  {x}\n  {y}" for x, y in zip(a, b) if x != y]
        sys.exit(f"{name_a} and {name_b} differ:\n" + "\n".join(diff))
    print(f"{name_a} == {name_b}: {len(a)} lines, the same bits")


# AVX-512's marks in objdump's AT&T listing: its registers and a few EVEX-only instructions
AVX512 = re.compile(r"%zmm|%k[0-7]\b|%[xy]mm(1[6-9]|2[0-9]|3[01])\b|\b(vpternlog|vpermt2|vpermi2|vrndscale|vscalef|"
                    r"vcvtps2qq|vpcompress|vexpand)")


def avx512_instructions(path):
    listing = subprocess.run(["objdump", "-d", "--no-show-raw-insn", path], capture_output=True, text=True,
                             check=True).stdout
    return sum(1 for line in listing.splitlines() if AVX512.search(line))


def check_instructions(v3_objects, avx512_object):
    if not shutil.which("objdump"):
        print("(objdump is missing: the instruction check is skipped)")
        return
    for path in v3_objects:
        n = avx512_instructions(path)
        if n:
            sys.exit(f"{path} holds {n} AVX-512 instructions: it would stop on an x86-64-v3 CPU")
        print(f"{os.path.basename(path)}: no AVX-512 instruction (runs on any x86-64-v3 CPU)")
    n = avx512_instructions(avx512_object)
    if n == 0:
        sys.exit(f"{avx512_object} holds no AVX-512 instruction: the check above cannot see them")
    print(f"{os.path.basename(avx512_object)}: {n} lines with AVX-512 instructions")


def main():
    v3, v4, lib = sys.argv[1:4]
    if len(sys.argv) > 5:
        check_instructions([sys.argv[4], lib], sys.argv[5])
    head, v3_lines = run(v3)
    print(f"x86-64-v3 header-only: {head}")
    head, forced = run(lib, QKV_KERNELS="avx2")
    print(f"library, QKV_KERNELS=avx2: {head}")
    if not head.startswith("kernels avx2 "):
        sys.exit("QKV_KERNELS=avx2 did not run the avx2 kernels")
    same("library (avx2)", forced, "x86-64-v3 header-only", v3_lines)
    env = {k: v for k, v in os.environ.items() if k != "QKV_KERNELS"}
    os.environ.clear()
    os.environ.update(env)
    head, default = run(lib)
    print(f"library, default: {head}")
    if cpu_has_avx512():
        if not head.startswith("kernels avx512 "):
            sys.exit("the CPU has AVX-512 but the library chose other kernels")
        head, v4_lines = run(v4)
        print(f"x86-64-v4 header-only: {head}")
        same("library (avx512)", default, "x86-64-v4 header-only", v4_lines)
        if v3_lines == v4_lines:
            sys.exit("x86-64-v3 and x86-64-v4 give the same bits everywhere: this test cannot tell them apart")
    else:
        if not head.startswith("kernels avx2 "):
            sys.exit("the CPU lacks AVX-512 but the library did not choose avx2")
        same("library (default, avx2)", default, "x86-64-v3 header-only", v3_lines)
        print("(this CPU has no AVX-512: the avx512 table is not checked here)")


if __name__ == "__main__":
    main()

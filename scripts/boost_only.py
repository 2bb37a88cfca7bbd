#!/usr/bin/env python3
"""boost_only.py DIR CANDIDATE...: makes DIR/boost a link to the first CANDIDATE/boost that holds
Boost's headers and prints that CANDIDATE (nothing when none does).

wasm/meson.build builds the pages' truth module for wasm32-wasi against Boost's headers through
DIR, a directory that holds only boost/: with /usr/include itself on the include path, a header
that wasi-libc lacks (pthread.h) would be found among glibc's, for the wrong machine.
"""
import os
import sys


def main(argv):
    if len(argv) < 3:
        sys.stderr.write(__doc__)
        return 2
    for d in argv[2:]:
        if os.path.exists(os.path.join(d, 'boost', 'version.hpp')):
            os.makedirs(argv[1], exist_ok=True)
            link = os.path.join(argv[1], 'boost')
            if os.path.islink(link):
                os.remove(link)
            os.symlink(os.path.join(d, 'boost'), link)
            print(d)
            return 0
    return 0


if __name__ == '__main__':
    sys.exit(main(sys.argv))

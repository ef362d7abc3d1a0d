# needs: pkg:gzip
# Compression, for the `compress` of Chen's thesis and of Nagle and Uhlig's Mach 3.0 runs (a
# user-bound program with little I/O): Debian's GNU gzip compresses 100 KB of text at its
# default level and decompresses it, checked byte for byte (`compress` is busybox's gzip).
seq 1 18000 > data.txt
/usr/bin/gzip -c data.txt > data.gz || exit 1
/usr/bin/gzip -dc data.gz > back.txt || exit 1
cmp back.txt data.txt && echo "gzip: $(wc -c < data.txt) bytes -> $(wc -c < data.gz)"

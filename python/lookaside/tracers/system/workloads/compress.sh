# A compression run: 170 KB of text compressed and decompressed by busybox gzip, checked.
seq 1 30000 > data.txt
gzip -c data.txt > data.gz
gzip -dc data.gz | cmp - data.txt && echo "compress: $(wc -c < data.txt) bytes -> $(wc -c < data.gz)"

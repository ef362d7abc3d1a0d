# A multi-process mix: compression, a client/server pair and a directory walk piped into a
# sort, all at once.
seq 1 60000 > data.txt
gzip -c data.txt > data.gz &
pingpong 500 256 &
find / -xdev 2>/dev/null | sort | wc -l &
wait

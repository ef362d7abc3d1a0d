# needs: tcc wordfreq
# A multi-process mix: compression, a client/server pair, a directory walk piped into a
# sort and a compile (tcc builds wordfreq in one go and runs it), all at once.
seq 1 60000 > data.txt
gzip -c data.txt > data.gz &
pingpong 500 256 &
find / -xdev 2>/dev/null | sort | wc -l &
(cd wordfreq && tcc -o wordfreq lex.c table.c sort.c main.c && ./wordfreq 3 main.c) &
wait

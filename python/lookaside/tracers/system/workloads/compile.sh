# needs: tcc wordfreq
# A compile: tcc builds wordfreq (four C files and a header, against glibc's headers) a file
# at a time, as make would, links it against glibc and runs it over its own source, checked.
cd wordfreq
for f in lex table sort main; do
  tcc -Wall -c $f.c -o $f.o || exit 1
done
tcc -o wordfreq lex.o table.o sort.o main.o || exit 1
./wordfreq 10 main.c lex.c table.c sort.c wordfreq.h > out.txt || exit 1
cmp out.txt expected.txt && echo "compile: $(head -n 1 out.txt)"

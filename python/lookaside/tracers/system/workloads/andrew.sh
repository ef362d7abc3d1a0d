# needs: tcc wordfreq pkg:coreutils pkg:findutils pkg:grep
# A file-system-heavy script in the spirit of the Modified Andrew Benchmark (the `mab` of
# Nagle and Uhlig's Mach 3.0 runs, the Andrew benchmark of Chen's thesis): over a source tree
# of 52 files (wordfreq and 5 directories of 8 generated C modules, a header each and a main
# program), Debian's coreutils, findutils and grep make its directories, copy every file,
# stat every file, read every byte, and tcc compiles it a file at a time and links it; the
# program's output is checked against awk's arithmetic, the copies against the sources.
C=/usr/bin
D=5 M=8
mkdir -p src && cp -R wordfreq src/ || exit 1
d=1
while [ $d -le $D ]; do
  mkdir -p src/lib$d
  m=1
  while [ $m -le $M ]; do
    k=$(( (d - 1) * M + m ))
    echo "int f$k(int x);" >> src/lib$d/lib$d.h
    {
      printf '#include "lib%d.h"\n\n/* Module %d of directory lib%d. */\n' $d $k $d
      printf 'static const int table[16] = {'
      i=0
      while [ $i -lt 16 ]; do printf ' %d,' $(( (k * i * 7 + 3) % 100 )); i=$((i + 1)); done
      printf ' };\n\nint f%d(int x)\n{\n    int s = 0;\n' $k
      printf '    for (int i = 0; i < 16; i++)\n        s += table[i] * ((x + i) %% %d);\n' \
        $((k + 1))
      printf '    return s %% 1000;\n}\n'
    } > src/lib$d/m$m.c
    m=$((m + 1))
  done
  d=$((d + 1))
done
{
  printf '#include <stdio.h>\n'
  d=1; while [ $d -le $D ]; do printf '#include "lib%d/lib%d.h"\n' $d $d; d=$((d + 1)); done
  printf '\nint main(void)\n{\n    long sum = 0;\n'
  k=1; while [ $k -le $((D * M)) ]; do printf '    sum += f%d(%d);\n' $k $k; k=$((k + 1)); done
  printf '    printf("sum %%ld\\n", sum);\n    return 0;\n}\n'
} > src/main.c
want=$(awk -v n=$((D * M)) 'BEGIN { for (k = 1; k <= n; k++) { s = 0
  for (i = 0; i < 16; i++) s += ((k * i * 7 + 3) % 100) * ((k + i) % (k + 1))
  t += s % 1000 }; print "sum " t }')
files=$(find src -type f | wc -l)
bytes=$(find src -type f | xargs cat | wc -c)
# Phase 1: the directories.
(cd src && $C/find . -type d) | while read -r dir; do $C/mkdir -p "copy/$dir" || exit 1; done
# Phase 2: every file copied.
$C/cp -pR src/. copy/ || exit 1
# Phase 3: every file's status.
$C/ls -lR copy > ls.txt || exit 1
[ "$($C/find copy -type f -exec $C/stat -c '%s %n' {} + | $C/wc -l)" -eq "$files" ] || exit 1
# Phase 4: every byte read.
$C/grep -r -c -w int copy > grep.txt || exit 1
[ "$($C/find copy -type f -exec $C/cat {} + | $C/wc -c)" -eq "$bytes" ] || exit 1
# Phase 5: the compile, a file at a time, and the link.
cd copy || exit 1
for f in lib*/m*.c main.c; do
  tcc -c "$f" -o "${f%.c}.o" || exit 1
done
tcc -o prog main.o lib*/m*.o || exit 1
got=$(./prog) || exit 1
[ "$got" = "$want" ] && echo "andrew: $files files, $bytes bytes, $got"

# needs: tcc wordfreq pkg:coreutils pkg:findutils pkg:grep
# A file-system-heavy script in the spirit of the Modified Andrew Benchmark (the `mab` of
# Nagle and Uhlig's Mach 3.0 runs, the Andrew benchmark of Chen's thesis): over a source tree
# of 52 files (wordfreq and 5 directories of 8 generated C modules, a header each and a main
# program), Debian's coreutils, findutils and grep make its directories, copy every file,
# stat every file, read every byte, and tcc compiles the generated program a file at a time
# (41 compiles) and links it; its output is checked against awk's arithmetic, the copies
# against the sources.
C=/usr/bin
D=5 M=8  # directories (lib1 to lib5) and modules in each
mkdir -p src/lib1 src/lib2 src/lib3 src/lib4 src/lib5 && cp -R wordfreq src/ || exit 1
awk -v D=$D -v M=$M 'BEGIN {
  main = "src/main.c"
  print "#include <stdio.h>" > main
  for (d = 1; d <= D; d++) print "#include \"lib" d "/lib" d ".h\"" > main
  print "\nint main(void)\n{\n    long sum = 0;" > main
  for (d = 1; d <= D; d++)
    for (m = 1; m <= M; m++) {
      k = (d - 1) * M + m; f = "src/lib" d "/m" m ".c"
      print "int f" k "(int x);" > ("src/lib" d "/lib" d ".h")
      print "#include \"lib" d ".h\"\n\n/* Module " k " of directory lib" d ". */" > f
      t = "static const int table[16] = {"
      for (i = 0; i < 16; i++) t = t " " (k * i * 7 + 3) % 100 ","
      print t " };\n\nint f" k "(int x)\n{\n    int s = 0;" > f
      print "    for (int i = 0; i < 16; i++)\n        s += table[i] * ((x + i) % " k + 1 ");" > f
      print "    return s % 1000;\n}" > f
      close(f)
      print "    sum += f" k "(" k ");" > main
    }
  print "    printf(\"sum %ld\\n\", sum);\n    return 0;\n}" > main
}' || exit 1
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

# needs: pkg:sed pkg:grep pkg:coreutils
# Text tools, for the sed and egrep of Chen's thesis (which he finds system-intensive: they
# read and write much and compute little): Debian's GNU sed spells out 2000 numbers as words,
# GNU grep selects and counts lines by regular expressions, GNU sort and uniq rank the words
# and the lines; a checksum of everything they printed is checked.
export LC_ALL=C
S=/usr/bin/sed G=/usr/bin/grep C=/usr/bin
seq 1 2000 | $S -e 's/0/zero /g;s/1/one /g;s/2/two /g;s/3/three /g;s/4/four /g' \
  -e 's/5/five /g;s/6/six /g;s/7/seven /g;s/8/eight /g;s/9/nine /g;s/ $//' > words.txt || exit 1
$S -E 's/(one|two) (three|four)/\2-\1/g; s/^(\w+) (\w+)/\2 \1/; /nine nine/d' words.txt \
  > edited.txt || exit 1
{
  $G -c -E 'seven (eight|nine)' words.txt
  $G -E '(three|four)-(one|two)' edited.txt | $C/wc -l
  $G -v -e zero -e five edited.txt | $G -c -w six
  $G -o -E '\w+' words.txt | $C/sort | $C/uniq -c | $C/sort -k1,1nr -k2
  $C/sort -t ' ' -k2,2 -k1,1r edited.txt | $C/uniq | $C/tail -n 200
  $C/sort -u edited.txt | $C/wc -l
} > report.txt || exit 1
sum=$($C/cksum < report.txt)
[ "$sum" = "2161788214 3250" ] && echo "text: $(wc -l < words.txt) lines, report $sum"

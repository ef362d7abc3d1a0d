# needs: pkg:sqlite3
# parameter: CLIENTS
# Transaction processing, for Huck and Hays' multi-user OLTP runs (1, 4 and 12 users):
# CLIENTS client processes (default 4; oltp-N for N) of Debian's sqlite3 share one database
# and run 240 TPC-B-like transactions between them (update an account, read it back, update
# its teller and branch, append to the history, commit), each client its own random mix;
# sqlite's file locks serialise the writers. The balances and the history must agree at the
# end. Phases: `load` (the database is built), `run` (the clients), `chk` (the audit).
N=${CLIENTS:-4}
T=$((240 / N))
[ $((T * N)) -eq 240 ] || { echo "oltp: 240 transactions do not divide among $N clients"; exit 1; }
Q=/usr/bin/sqlite3
lookaside-phase load
$Q bank.db <<'SQL' || exit 1
.bail on
CREATE TABLE branches(bid INTEGER PRIMARY KEY, bbalance INTEGER, filler TEXT);
CREATE TABLE tellers(tid INTEGER PRIMARY KEY, bid INTEGER, tbalance INTEGER, filler TEXT);
CREATE TABLE accounts(aid INTEGER PRIMARY KEY, bid INTEGER, abalance INTEGER, filler TEXT);
CREATE TABLE history(tid INTEGER, bid INTEGER, aid INTEGER, delta INTEGER, mtime TEXT,
                     filler TEXT);
BEGIN;
WITH RECURSIVE n(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM n WHERE x < 4)
  INSERT INTO branches SELECT x, 0, hex(zeroblob(44)) FROM n;
WITH RECURSIVE n(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM n WHERE x < 40)
  INSERT INTO tellers SELECT x, (x - 1) / 10 + 1, 0, hex(zeroblob(42)) FROM n;
WITH RECURSIVE n(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM n WHERE x < 10000)
  INSERT INTO accounts SELECT x, (x - 1) / 2500 + 1, 0, hex(zeroblob(42)) FROM n;
COMMIT;
SQL
i=1
while [ $i -le $N ]; do
  awk -v seed=$i -v n=$T 'BEGIN {
    srand(seed); print ".bail on"; print ".timeout 600000"
    for (k = 0; k < n; k++) {
      aid = int(rand() * 10000) + 1; tid = int(rand() * 40) + 1; bid = int((tid - 1) / 10) + 1
      d = int(rand() * 1999999) - 999999; sum += d
      print "BEGIN IMMEDIATE;"
      print "UPDATE accounts SET abalance = abalance + " d " WHERE aid = " aid ";"
      print "SELECT abalance FROM accounts WHERE aid = " aid ";"
      print "UPDATE tellers SET tbalance = tbalance + " d " WHERE tid = " tid ";"
      print "UPDATE branches SET bbalance = bbalance + " d " WHERE bid = " bid ";"
      print "INSERT INTO history VALUES (" tid ", " bid ", " aid ", " d ", datetime(\047now\047), \047" sprintf("%022d", k) "\047);"
      print "COMMIT;"
    }
    print sum > "sum." seed
  }' > client.$i.sql || exit 1
  i=$((i + 1))
done
lookaside-phase run
i=1
while [ $i -le $N ]; do
  $Q bank.db < client.$i.sql > client.$i.out &
  i=$((i + 1))
done
fail=0
for p in $(jobs -p); do wait $p || fail=1; done
wait
[ $fail -eq 0 ] || { echo "oltp: a client failed"; exit 1; }
lookaside-phase chk
want=$(cat sum.* | awk '{ s += $1 } END { print s }')
got=$($Q bank.db "SELECT (SELECT sum(abalance) FROM accounts) || ' ' ||
  (SELECT sum(tbalance) FROM tellers) || ' ' || (SELECT sum(bbalance) FROM branches) || ' ' ||
  (SELECT sum(delta) FROM history) || ' ' || (SELECT count(*) FROM history)") || exit 1
[ "$got" = "$want $want $want $want 240" ] && echo "oltp: $N clients, 240 transactions, $got"

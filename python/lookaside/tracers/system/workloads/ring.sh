# parameter: PROCS
# A ring of PROCS processes (default 4; ring-N for N) passing a token through pipes, 4000
# hops, each process touching 8 pages of its own per hop (ring.c): Bala, Kaashoek and
# Weihl's multi-address-space case, a request crossing a chain of user-level servers.
ring "${PROCS:-4}" 4000 8

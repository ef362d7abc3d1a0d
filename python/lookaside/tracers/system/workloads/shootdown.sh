# needs: cc:smp/shootdown.c
# TLB shootdowns from a multi-threaded program (smp/shootdown.c): the main thread maps a
# region of 8 pages, a worker on every other CPU stores into each page, and the main thread
# unmaps it, 8 times; each unmap shoots the region's translations down on the workers' CPUs.
# Capture it with several CPUs (`--cpus N`); on one there are no workers.
shootdown 8 8

# Operating-system primitives in the spirit of Ousterhout's benchmark (the `ousterhout` of
# Nagle and Uhlig's Mach 3.0 measurements): getpid, context switches over a pipe, select,
# block copy, file-cache reads, open-close and create-delete, by count (ousterhout.c).
ousterhout

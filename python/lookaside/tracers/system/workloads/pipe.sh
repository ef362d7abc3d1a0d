# A client and a server talking over pipes: 2000 round trips of 64-byte messages.
pingpong 2000 64

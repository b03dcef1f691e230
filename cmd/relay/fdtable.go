package main

// fdTableTarget is how many descriptors presizeFDTable makes room for. A
// gateway holds two per open stream (the client's and the provider's) and
// one per idle keep-alive connection on either side, so its count follows
// its load; 65,536 covers tens of thousands of streams for about half a
// megabyte of kernel memory, and past it the table grows as before.
const fdTableTarget = 1 << 16

"""Runtime: the greenlet executor that turns game loops into batches, and its process workers."""

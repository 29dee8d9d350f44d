"""The plugin API: extension points (hookspecs), registration records, the interfaces plugins
implement, the types they exchange (tasks, programs), plugin discovery, hardware profiles and the
shared errors and option checks. The lowest layer: it imports no other part of tcl."""

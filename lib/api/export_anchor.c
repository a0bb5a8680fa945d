/* The shared library is the static archive linked whole; this file only gives
 * CMake a source for the SHARED target. Nothing here is exported. */
typedef int dt_export_anchor_unused;

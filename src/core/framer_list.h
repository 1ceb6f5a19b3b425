/* framer_list.h: every body framer, one line each: GLSB_FRAMER(name) is glsb_framer_<name> in framer_<name>.c. */
GLSB_FRAMER(raw)
GLSB_FRAMER(lines)
GLSB_FRAMER(sse)
GLSB_FRAMER(connect)
GLSB_FRAMER(eventstream)

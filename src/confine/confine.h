/* confine.h: the subcommands of glsb-confine, each in its own file. */
#ifndef GLSB_CONFINE_H
#define GLSB_CONFINE_H

/* Each returns the process exit status. argv[0] is the subcommand name. */
int glsb_cmd_sandbox(int argc, char **argv);  /* sandbox.c: start a confined process tree */
int glsb_cmd_doctor(int argc, char **argv);   /* doctor.c: report kernel confinement features (JSON) */
int glsb_cmd_write(int argc, char **argv);    /* ws_write.c: write_workspace_file */
int glsb_cmd_run(int argc, char **argv);      /* ws_run.c: run_workspace_command */
int glsb_cmd_read(int argc, char **argv);     /* ws_read.c: read one file (downloads) */
int glsb_cmd_serve(int argc, char **argv);    /* ws_serve.c: the file server (in a confined child only) */
int glsb_ws_writer(const char *root);         /* ws_write.c: the file server's writer for one root */
int glsb_cmd_pack(int argc, char **argv);     /* ws_pack.c: the workspace as a tar stream (snapshots) */


/* The file server's bounds (ws_serve.c, sb_control.c's relay; CONTROL.md "files"): a request's bytes
 * (a write's data and its words), and the bytes of one answer (a read's file, a list's records). */
#define GLSB_FILES_REQUEST_MAX ((1u << 20) + 65536)
#define GLSB_FILES_DATA_MAX (1u << 20)

#endif

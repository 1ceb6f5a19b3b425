/* confine.h: the subcommands of glsb-confine, each in its own file. */
#ifndef GLSB_CONFINE_H
#define GLSB_CONFINE_H

/* Each returns the process exit status. argv[0] is the subcommand name. */
int glsb_cmd_sandbox(int argc, char **argv);  /* sandbox.c: start a confined process tree */
int glsb_cmd_doctor(int argc, char **argv);   /* doctor.c: report kernel confinement features (JSON) */
int glsb_cmd_write(int argc, char **argv);    /* ws_write.c: write_workspace_file */
int glsb_cmd_run(int argc, char **argv);      /* ws_run.c: run_workspace_command */
int glsb_cmd_read(int argc, char **argv);     /* ws_read.c: read one file (downloads) */

#endif

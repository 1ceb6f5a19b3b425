/* main.c: glsb-confine's entry point; dispatches to one subcommand. */
#include <stdio.h>
#include <string.h>

#include "confine.h"
#include "proc.h"

static const struct {
	const char *name;
	int (*fn)(int, char **);
	const char *help;
} commands[] = {
	{"sandbox", glsb_cmd_sandbox, "start a confined process tree (local provider)"},
	{"doctor", glsb_cmd_doctor, "print the confinement features this kernel offers (JSON)"},
	{"write", glsb_cmd_write, "write one file beneath a workspace root (write_workspace_file)"},
	{"run", glsb_cmd_run, "run an exact argv in a workspace (run_workspace_command)"},
	{"read", glsb_cmd_read, "print one regular file beneath a root (downloads)"},
	{"pack", glsb_cmd_pack, "print the trees below roots as one tar stream (snapshots)"},
};

static void usage(FILE *out)
{
	fputs("usage: glsb-confine COMMAND [options]\n\ncommands:\n", out);
	for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
		fprintf(out, "  %-8s %s\n", commands[i].name, commands[i].help);
	fputs("\n'glsb-confine COMMAND --help' describes each command.\n", out);
}

int main(int argc, char **argv)
{
	glsb_remember_process_text(argc, argv);
	if (argc < 2) {
		usage(stderr);
		return 2;
	}
	if (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help")) {
		usage(stdout);
		return 0;
	}
	for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
		if (!strcmp(argv[1], commands[i].name))
			return commands[i].fn(argc - 1, argv + 1);
	fprintf(stderr, "glsb-confine: unknown command '%s'\n", argv[1]);
	usage(stderr);
	return 2;
}

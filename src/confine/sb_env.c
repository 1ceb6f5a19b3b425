/* sb_env.c: PROGRAM's environment, the same for the sandbox's PROGRAM and for every call's helper
 * (sb_call.c): exactly --env, plus HOME, PATH and LANG unless --env gives them. */
#include <string.h>

#include "sb.h"

static int env_has(const struct sb *sb, const char *key)
{
	size_t kl = strlen(key);
	for (int i = 0; i < sb->opt.nenv; i++)
		if (!strncmp(sb->opt.env[i], key, kl) && sb->opt.env[i][kl] == '=')
			return 1;
	return 0;
}

char **glsb_sb_program_env(const struct sb *sb)
{
	static char *envp[260];
	int ne = 0;
	for (int i = 0; i < sb->opt.nenv; i++)
		envp[ne++] = (char *)sb->opt.env[i];
	if (!env_has(sb, "HOME"))
		envp[ne++] = "HOME=" SANDBOX_HOME;
	if (!env_has(sb, "PATH"))
		envp[ne++] = "PATH=/usr/local/bin:/usr/bin:/bin";
	if (!env_has(sb, "LANG"))
		envp[ne++] = "LANG=C.UTF-8";
	envp[ne] = NULL;
	return envp;
}


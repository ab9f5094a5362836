#ifndef JPT_PTDECODE_COMMANDS_H
#define JPT_PTDECODE_COMMANDS_H

/* Each returns the process exit status: 0 ok, 1 bad or incomplete input
 * (what could be read is still reported), 2 usage error. */
int cmd_info(int argc, char **argv);
int cmd_dump(int argc, char **argv);
int cmd_events(int argc, char **argv);
int cmd_hot(int argc, char **argv);
int cmd_export(int argc, char **argv);
int cmd_context(int argc, char **argv);
int cmd_flow(int argc, char **argv);
int cmd_stats(int argc, char **argv);

#endif

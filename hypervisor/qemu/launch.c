// SPDX-License-Identifier: GPL-2.0-only
#include "qemu/launch.h"
#include "clock.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

int rdb_qemu_spawn(char *const *argv, const char *logpath,
		   struct rdb_qemu_proc *out)
{
	int err_pipe[2], err = 0;
	pid_t pid;

	if (pipe2(err_pipe, O_CLOEXEC) < 0)
		return -errno;
	pid = fork();
	if (pid < 0) {
		err = -errno;
		close(err_pipe[0]);
		close(err_pipe[1]);
		return err;
	}
	if (pid == 0) {
		sigset_t none;
		int fd = open(logpath, O_WRONLY | O_CREAT | O_APPEND, 0600);

		sigemptyset(&none);
		sigprocmask(SIG_SETMASK, &none, NULL);
		setsid();
		if (fd >= 0) {
			dup2(fd, 1);
			dup2(fd, 2);
		}
		execvp(argv[0], argv);
		err = errno;
		(void)!write(err_pipe[1], &err, sizeof(err));
		_exit(127);
	}
	close(err_pipe[1]);
	/* exec succeeded iff the CLOEXEC pipe closes without a word. */
	if (read(err_pipe[0], &err, sizeof(err)) == (ssize_t)sizeof(err)) {
		close(err_pipe[0]);
		waitpid(pid, NULL, 0);
		return -err;
	}
	close(err_pipe[0]);
	out->pid = pid;
	return 0;
}

int rdb_qemu_kill(struct rdb_qemu_proc *p, uint64_t deadline_ns)
{
	if (p->pid <= 0)
		return 0;
	kill(p->pid, SIGTERM);
	while (rdb_now_ns() < deadline_ns) {
		if (waitpid(p->pid, NULL, WNOHANG) == p->pid) {
			p->pid = -1;
			return 0;
		}
		usleep(10000);
	}
	kill(p->pid, SIGKILL);
	waitpid(p->pid, NULL, 0);
	p->pid = -1;
	return -ETIMEDOUT;
}

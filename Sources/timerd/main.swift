import TimerdDaemon
import TimerdSystem

// Before anything starts a task: no job may reach libdispatch's global concurrent queue.
GlobalExecutor.redirect()
Daemon.main(arguments: Array(CommandLine.arguments.dropFirst()))

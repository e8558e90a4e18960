import TimerdDaemon
import TimerdSystem

Daemon.main(arguments: Array(CommandLine.arguments.dropFirst()))

import Glibc
import TimerdCLI

exit(Timerctl.main(arguments: Array(CommandLine.arguments.dropFirst())))

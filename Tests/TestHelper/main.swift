import Dispatch
import Glibc
import Synchronization
import TimerdSystem

// timerd-test-helper: does, in a process of its own, what a test must not do in the test process.
//
// Every test of the suite runs at the same time in one process, so signal dispositions, the environment
// (TZ) and resource limits changed there would change them under every other test, and under every child
// they start meanwhile. The tests that need such a change start this helper instead; it makes the change,
// prints what it saw, and the test checks the output. It is built with the tests (`swift build
// --build-tests`) and found next to the test bundle (Tests/TestSupport/TestBinaries.swift).
//
//   signals        ignores SIGUSR2, prints its SigIgn (hex), restores the default, prints SigIgn again.
//   spawn-ignoring-sigterm
//                  ignores SIGTERM and blocks every signal (as the daemon's Dispatch threads do), spawns
//                  `sleep 600` with Spawn.run, prints "PID SIGBLK" (the child, its own mask), waits for the
//                  child and prints how it ended (TerminationStatus.description).
//   file-limit     lowers its soft limit on open descriptors to one below the hard one and prints
//                  "limits SOFT HARD", "raised FROM TO" (CurrentProcess.raiseOpenFileLimit), "limits SOFT
//                  HARD", "raised FROM TO" (again).
//   tz             runs glibc's localtime_r and mktime in its own zone (TZ, set by the test in the helper's
//                  environment) for each stdin line, in order (mktime keeps state between calls):
//                    local T                       -> FIELDS
//                    mktime Y MON MDAY H M S ISDST -> T FIELDS
//                  FIELDS: year mon mday hour min sec wday yday isdst gmtoff, as in struct tm.
//   main-loop      runs an IOWatcher's loop on its main thread (as timerd does) and prints, for each thing
//                  handed to a queue that targets the main queue, whether the main thread ran it: a pipe's
//                  handler ("readable main"), work `after` 50 ms ("after main MS"), work queued on the
//                  main queue by another thread ("async main"); and for work `after` 20 ms on a queue of
//                  its own, "after other". Then exits 0 (2 if that takes 10 s).
//   exec PROGRAM [ARG…]
//                  unblocks every signal, restores SIGINT's and SIGTERM's default dispositions and execs
//                  PROGRAM: a process the tests start (Foundation's Process, from a thread that blocks
//                  almost every signal) inherits that mask, so SIGINT, as Ctrl-C sends it, would wait forever.

func fail(_ message: String) -> Never {
    CurrentProcess.writeToStderr("timerd-test-helper: \(message)\n")
    exit(2)
}

/// One line on stdout, written at once (unbuffered: the test reads the first line while the helper waits).
func say(_ line: String) {
    do { try FileDescriptor.standardOutput.writeAll(line + "\n") } catch { fail("write: \(error)") }
}

func statusField(_ field: String) -> String {
    guard let bytes = try? FileSystem.readFile("/proc/self/status") else { fail("cannot read /proc/self/status") }
    for line in String(decoding: bytes, as: UTF8.self).split(separator: "\n") where line.hasPrefix(field + ":") {
        return String(line.dropFirst(field.count + 1).drop(while: { $0 == " " || $0 == "\t" }))
    }
    fail("no \(field) in /proc/self/status")
}

func fields(_ time: tm) -> String {
    [time.tm_year, time.tm_mon, time.tm_mday, time.tm_hour, time.tm_min, time.tm_sec, time.tm_wday, time.tm_yday,
     time.tm_isdst].map(String.init).joined(separator: " ") + " \(time.tm_gmtoff)"
}

let mainThread = pthread_self()

/// "main" on the main thread, else "other".
func threadName() -> String { pthread_equal(pthread_self(), mainThread) != 0 ? "main" : "other" }

/// main-loop: says `line`; the fourth ends the process.
let reports = Atomic<Int>(0)
func report(_ line: String) {
    say(line)
    if reports.add(1, ordering: .relaxed).newValue == 4 { exit(0) }
}

let arguments = CommandLine.arguments.dropFirst()
do {
    switch arguments.first {
    case "signals":
        try Signals.ignore(.usr2)
        say(statusField("SigIgn"))
        try Signals.restoreDefault(.usr2)
        say(statusField("SigIgn"))

    case "spawn-ignoring-sigterm":
        try Signals.ignore(.term)
        try Signals.blockAllInCurrentThread()
        let mask = statusField("SigBlk")
        let devNull = try FileDescriptor.openDevNull()
        let child = try Spawn.run(program: "/bin/sleep", arguments: ["600"], environment: [:], output: devNull)
        say("\(child.pid) \(mask)")
        guard let status = try child.waitExit(blocking: true) else { fail("waitpid returned without a status") }
        say(status.description)

    case "file-limit":
        let hard = try CurrentProcess.openFileLimits().hard
        var lowered = rlimit(rlim_cur: rlim_t(hard - 1), rlim_max: rlim_t(hard))
        guard setrlimit(__rlimit_resource_t(RLIMIT_NOFILE.rawValue), &lowered) == 0 else { fail("setrlimit: errno \(errno)") }
        for _ in 0..<2 {
            let limits = try CurrentProcess.openFileLimits()
            say("limits \(limits.soft) \(limits.hard)")
            let raised = try CurrentProcess.raiseOpenFileLimit()
            say("raised \(raised.from) \(raised.to)")
        }

    case "tz":
        tzset()
        while let line = readLine() {
            let words = line.split(separator: " ")
            let numbers = words.dropFirst().compactMap { Int64($0) }
            switch (words.first, numbers.count) {
            case ("local", 1):
                var t = time_t(numbers[0])
                var result = tm()
                guard localtime_r(&t, &result) != nil else { fail("localtime_r(\(numbers[0])) failed") }
                say(fields(result))
            case ("mktime", 7):
                var request = tm()
                request.tm_year = Int32(numbers[0])
                request.tm_mon = Int32(numbers[1])
                request.tm_mday = Int32(numbers[2])
                request.tm_hour = Int32(numbers[3])
                request.tm_min = Int32(numbers[4])
                request.tm_sec = Int32(numbers[5])
                request.tm_isdst = Int32(numbers[6])
                let t = mktime(&request)
                say("\(t) \(fields(request))")
            default:
                fail("tz: cannot read \"\(line)\"")
            }
        }

    case "main-loop":
        let watcher = try IOWatcher(ownThread: false)
        let lane = DispatchQueue(label: "timerd.test.lane", target: .main)
        let pipe = try FileDescriptor.makePipe(nonBlockingRead: true)
        let start = DispatchTime.now()
        _ = try watcher.watch(pipe.read, for: .readable, on: lane) { _ in
            _ = try? pipe.read.tryRead(upToCount: 16)
            report("readable \(threadName())")
        }
        watcher.after(start + .milliseconds(50), on: lane) {
            let elapsed = (DispatchTime.now().uptimeNanoseconds - start.uptimeNanoseconds) / 1_000_000
            report("after \(threadName()) \(elapsed)")
        }
        watcher.after(start + .milliseconds(20), on: DispatchQueue(label: "timerd.test.other")) {
            report("after \(threadName())")
            try? pipe.write.writeAll("x")
            DispatchQueue.global().async { DispatchQueue.main.async { report("async \(threadName())") } }
        }
        // A loop that does not run the main queue's work would leave the test waiting for good.
        DispatchQueue.global().asyncAfter(deadline: .now() + 10) { fail("main-loop: \(reports.load(ordering: .relaxed)) of 4 in 10 s") }
        watcher.runOnMainThread()

    case "exec":
        let argv = Array(arguments.dropFirst())
        guard let program = argv.first else { fail("exec: no program") }
        try Signals.block([])
        try Signals.restoreDefault(.int)
        try Signals.restoreDefault(.term)
        var cArguments = argv.map { strdup($0) } + [nil]
        execv(program, &cArguments)
        fail("exec \(program): errno \(errno)")

    default:
        fail("usage: timerd-test-helper signals | spawn-ignoring-sigterm | file-limit | tz | main-loop | exec PROGRAM [ARG…]")
    }
} catch {
    fail("\(error)")
}

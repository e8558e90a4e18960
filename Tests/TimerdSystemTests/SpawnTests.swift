import Glibc
import Testing
import TimerdSystem
import TimerdTestSupport

@Suite struct SpawnTests {
    @Test func outputOfBothStreamsAndExitCode() throws {
        let result = try run("/bin/sh", ["-c", "echo out; echo err >&2; exit 3"])
        #expect(result.output == "out\nerr\n")
        #expect(result.status == .exited(3))
        #expect(result.status.description == "exited with code 3")
    }

    @Test func environmentIsPassedExactlyAndSearchedForThePath() throws {
        // "env" has no slash: found through the child's PATH, not the test process's.
        let result = try run("env", environment: ["PATH": "/usr/bin:/bin", "FOO": "bar baz", "EMPTY": ""])
        #expect(result.output.split(separator: "\n").sorted() == ["EMPTY=", "FOO=bar baz", "PATH=/usr/bin:/bin"])
        #expect(result.status.isSuccess)
    }

    @Test func withoutPathTheDefaultSearchPathIsUsed() throws {
        let result = try run("env", environment: ["ONLY": "1"])
        #expect(result.output == "ONLY=1\n")
    }

    @Test func programMissingFromTheChildsPathIsNotFound() throws {
        let error = #expect(throws: SpawnError.self) {
            try run("env", environment: ["PATH": "/nonexistent:relative/bin"])
        }
        #expect(error?.stage == .program)
        #expect(error?.errno == .noSuchFileOrDirectory)
    }

    @Test func workingDirectoryIsHonoured() throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        try FileSystem.makeDirectories(directory.path + "/work dir")
        try writeFile(directory.path + "/work dir/script", "echo relative")
        let result = try run("/bin/pwd", workingDirectory: directory.path + "/work dir")
        #expect(result.output == directory.path + "/work dir\n")
        // A relative program path is resolved in the new working directory.
        let relative = try run("/bin/sh", ["./script"], workingDirectory: directory.path + "/work dir")
        #expect(relative.output == "relative\n")
    }

    @Test func missingProgramIsENOENT() throws {
        let error = #expect(throws: SpawnError.self) {
            try run("/no/such", ["x"])
        }
        #expect(error?.stage == .program)
        #expect(error?.errno == .noSuchFileOrDirectory)
        #expect(error?.description == "cannot start /no/such: No such file or directory (ENOENT)")
    }

    @Test func aDescriptorThatIsNotACgroupIsRefusedAndNothingStarts() throws {
        // A cgroup is a directory of the cgroup v2 file system; any other directory is refused by clone3.
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let notACgroup = try FileDescriptor.open(directory.path, .readOnly, options: .directory)
        defer { try? notACgroup.close() }
        let devNull = try FileDescriptor.openDevNull()
        defer { try? devNull.close() }
        let marker = directory.path + "/ran"
        let error = #expect(throws: SpawnError.self) {
            try Spawn.run(program: "/bin/sh", arguments: ["-c", "touch \(marker)"], environment: [:], output: devNull,
                          cgroup: notACgroup)
        }
        #expect(error?.stage == .cgroup)
        #expect(error?.description.hasPrefix("cannot start /bin/sh in its cgroup: ") == true)
        #expect(!FileSystem.fileExists(marker))
    }

    @Test func nonExecutableProgramIsEACCES() throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        try writeFile(directory.path + "/data", "not a program")
        let error = #expect(throws: SpawnError.self) {
            try run(directory.path + "/data")
        }
        #expect(error?.errno == .permissionDenied)
        // Found in PATH but not executable: EACCES, like execvp.
        let searched = #expect(throws: SpawnError.self) {
            try run("data", environment: ["PATH": directory.path])
        }
        #expect(searched?.errno == .permissionDenied)
    }

    @Test func badWorkingDirectoryIsReported() throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let missing = #expect(throws: SpawnError.self) {
            try run("/bin/true", workingDirectory: directory.path + "/nope")
        }
        #expect(missing?.stage == .workingDirectory)
        #expect(missing?.errno == .noSuchFileOrDirectory)
        #expect(
            missing?.description
                == "cannot start /bin/true: working directory \(directory.path)/nope: No such file or directory (ENOENT)")

        try writeFile(directory.path + "/file", "")
        let notDirectory = #expect(throws: SpawnError.self) {
            try run("/bin/true", workingDirectory: directory.path + "/file")
        }
        #expect(notDirectory?.stage == .workingDirectory)
        #expect(notDirectory?.errno == .notDirectory)
    }

    @Test func startReturnsAChildThatFailsLaterWhenItCannotExec() throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let output = try FileDescriptor.openDevNull()
        defer { try? output.close() }
        // The directory is checked by the child, after `start` has returned: the child exits with 127
        // without running anything, and the pending start says why.
        let (child, exec) = try Spawn.start(
            program: "/bin/true", environment: [:], workingDirectory: directory.path + "/nope", output: output)
        #expect(try child.waitExit(blocking: true) == .exited(127))
        #expect(exec.settled)
        let failure = exec.outcome()
        #expect(failure?.stage == .workingDirectory)
        #expect(failure?.errno == .noSuchFileOrDirectory)
        #expect(exec.outcome() == nil)  // told once
        try child.pidfd.close()
    }

    @Test func startLeavesTheOutputPipeToTheChild() throws {
        // Once the caller has closed its write end, only the child holds the pipe: its reader sees end of
        // file when the child is done with it, before anyone asks how the start went.
        let pipe = try FileDescriptor.makePipe(nonBlockingRead: true)
        defer { try? pipe.read.close() }
        let (child, exec) = try Spawn.start(program: "/bin/sh", arguments: ["-c", "echo hi"], environment: [:], output: pipe.write)
        try pipe.write.close()
        var output: [UInt8] = []
        var sawEnd = false
        let deadline = ContinuousClock.now + .seconds(10)
        while !sawEnd, ContinuousClock.now < deadline {
            switch try pipe.read.tryRead(upToCount: 4096) {
            case nil: usleep(1_000)
            case let bytes? where bytes.isEmpty: sawEnd = true
            case let bytes?: output += bytes
            }
        }
        #expect(sawEnd)
        #expect(String(decoding: output, as: UTF8.self) == "hi\n")
        #expect(try child.waitExit(blocking: true) == .exited(0))
        #expect(exec.outcome() == nil)
        try child.pidfd.close()
    }

    @Test func startOfAProgramThatRunsReportsNoFailure() throws {
        let output = try FileDescriptor.openDevNull()
        defer { try? output.close() }
        let (child, exec) = try Spawn.start(program: "/bin/sh", arguments: ["-c", "exit 127"], environment: [:], output: output)
        // Its own exit status 127 is the program's: it reached execve.
        #expect(try child.waitExit(blocking: true) == .exited(127))
        #expect(exec.outcome() == nil)
        try child.pidfd.close()
    }

    @Test func startDoesNotNeedTheCallersStrings() throws {
        let output = try FileDescriptor.openDevNull()
        defer { try? output.close() }
        // Many starts whose argument strings the caller frees at once: every child sees its own.
        var started: [(ChildProcess, PendingExec, Int32)] = []
        for code in Int32(1)...20 {
            let (child, exec) = try Spawn.start(program: "/bin/sh", arguments: ["-c", "exit \(code)"], environment: [:], output: output)
            started.append((child, exec, code))
        }
        for (child, exec, code) in started {
            #expect(try child.waitExit(blocking: true) == .exited(code))
            #expect(exec.outcome() == nil)
            try child.pidfd.close()
        }
    }

    @Test func nulBytesAndBadNamesAreRejected() throws {
        let output = try FileDescriptor.openDevNull()
        defer { try? output.close() }
        for (arguments, environment) in [(["a\0b"], [:]), ([], ["A": "x\0y"]), ([], ["A=B": "x"]), ([], ["": "x"])] {
            let error = #expect(throws: SpawnError.self) {
                try Spawn.run(program: "/bin/true", arguments: arguments, environment: environment, output: output)
            }
            #expect(error?.stage == .invalidArgument)
        }
    }

    /// The spawning process ignores SIGTERM and the spawning thread blocks every signal, as the daemon's
    /// Dispatch threads do. That process is timerd-test-helper, not this one: a disposition is the whole
    /// process's, and every other test (and every child it starts meanwhile) would see SIGTERM ignored.
    @Test func signalMaskAndDispositionsAreResetEvenFromABlockingThread() throws {
        let pipe = try FileDescriptor.makePipe()
        defer { try? pipe.read.close() }
        let helper = try Spawn.run(program: TestBinaries.helper(), arguments: ["spawn-ignoring-sigterm"], environment: [:], output: pipe.write)
        try pipe.write.close()
        defer { try? helper.pidfd.close() }
        // The helper's first line: its child (`sleep 600`, long enough that only the SIGTERM below ends it)
        // and the helper's own signal mask when it spawned it.
        let first = try readLine(pipe.read).split(separator: " ")
        var childEnded = false
        defer {
            // On a failure before the SIGTERM: the child by its PID (not reaped before the helper's second
            // line, so still ours), then the helper, which ignores SIGTERM.
            if !childEnded, first.count == 2, let pid = Int32(first[0]) { _ = try? ProcessControl.signalProcess(pid, .kill) }
            _ = try? helper.signal(.kill)
            _ = try? helper.waitExit(blocking: true)
        }
        try #require(first.count == 2, "the helper said \(first)")
        let child = try #require(Int32(first[0]))
        #expect(first[1] != "0000000000000000")  // The precondition is real.
        // Spawn.run returned after the exec succeeded, so this is sleep's own state.
        #expect(try procStatusField(String(child), "SigBlk") == "0000000000000000")
        // glibc's two internal real-time signals (32, 33) are out of sigaction's reach and keep
        // whatever the parent had (glibc's own posix_spawn ignored them); no standard signal
        // (1...31) may be ignored.
        let ignoredField = try #require(try procStatusField(String(child), "SigIgn"))
        let ignored = try #require(UInt64(ignoredField, radix: 16))
        #expect(ignored & 0x7fff_ffff == 0)
        // Default SIGTERM disposition: it kills. The helper reports how its child ended, then exits.
        #expect(try ProcessControl.signalProcess(child, .term))
        let ended = try readLine(pipe.read)
        childEnded = true
        #expect(ended == TerminationStatus.signaled(.term).description, "child \(child) ended: \(ended)")
        #expect(try helper.pidfd.waitReadable(timeoutMilliseconds: 10_000))
        #expect(try helper.waitExit() == .exited(0))
    }

    @Test func childLeadsItsOwnGroupAndGroupKillReachesGrandchildren() throws {
        let pipe = try FileDescriptor.makePipe()
        defer { try? pipe.read.close() }
        let child = try Spawn.run(
            program: "/bin/sh", arguments: ["-c", "sleep 100 & echo $!; wait"],
            environment: ["PATH": "/usr/bin:/bin"], output: pipe.write)
        try pipe.write.close()
        defer { try? child.pidfd.close() }
        #expect(getpgid(child.pid) == child.pid)
        #expect(getsid(child.pid) == child.pid)

        let grandchild = try #require(Int32(try readLine(pipe.read)))
        #expect(getpgid(grandchild) == child.pid)
        // Watch the grandchild before killing (it cannot be reaped yet: sh is waiting on it).
        let grandchildFd = try ProcessControl.openPidfd(grandchild)
        defer { try? grandchildFd.close() }

        #expect(try ProcessControl.signalProcessGroup(child.pid, .kill))
        #expect(try child.waitExit(blocking: true) == .signaled(.kill))
        #expect(try grandchildFd.waitReadable(timeoutMilliseconds: 10_000))
        // The grandchild held the pipe's write end too: end of file means it is gone.
        #expect(try pipe.read.readToEnd() == [])
        // The group is empty now (the grandchild may linger as a zombie of init, which still
        // counts as a member until reaped; then ESRCH gives false).
        _ = try ProcessControl.signalProcessGroup(child.pid, .kill)
    }

    @Test func childHasOnlyStandardDescriptors() throws {
        // A descriptor deliberately opened WITHOUT close-on-exec: closefrom must still drop it.
        let leaky = open("/dev/null", O_RDONLY)
        try #require(leaky >= 3)
        defer { Glibc.close(leaky) }
        let pipe = try FileDescriptor.makePipe()
        defer { try? pipe.read.close() }
        // Inspect the shell once it says it is running: right after exec, the dynamic loader
        // of the new program may still hold a library open on fd 3.
        let child = try Spawn.run(
            program: "/bin/sh", arguments: ["-c", "echo ready; sleep 30"], environment: ["PATH": "/bin"],
            output: pipe.write)
        try pipe.write.close()
        #expect(try readLine(pipe.read) == "ready")
        let descriptors = try FileSystem.glob("/proc/\(child.pid)/fd/*").map { $0.split(separator: "/").last! }
        #expect(descriptors == ["0", "1", "2"])
        #expect(try FileSystem.realPath("/proc/\(child.pid)/fd/0") == "/dev/null")
        #expect(try killAndReap(child) == .signaled(.kill))
    }

    @Test func pidfdBecomesReadableAtExit() throws {
        let devNull = try FileDescriptor.openDevNull()
        defer { try? devNull.close() }
        let child = try Spawn.run(program: "/bin/sleep", arguments: ["30"], environment: [:], output: devNull)
        defer { try? child.pidfd.close() }
        var entry = pollfd(fd: child.pidfd.rawValue, events: Int16(POLLIN), revents: 0)
        #expect(poll(&entry, 1, 0) == 0)
        #expect(try child.waitExit() == nil)
        #expect(try child.signal(.kill))
        #expect(poll(&entry, 1, 10_000) == 1)
        #expect(entry.revents & Int16(POLLIN) != 0)
        #expect(try child.waitExit() == .signaled(.kill))
        #expect(TerminationStatus.signaled(.kill).description == "killed by SIGKILL")
        // Reaped: signalling reports it is gone, and waiting again is ECHILD.
        #expect(try child.signal(.term) == false)
        #expect(throws: Errno.noChildProcess) { try child.waitExit() }
    }

    @Test func manyChildrenAtOnce() throws {
        let devNull = try FileDescriptor.openDevNull()
        defer { try? devNull.close() }
        var children: [ChildProcess] = []
        for code in 0..<20 {
            children.append(
                try Spawn.run(
                    program: "/bin/sh", arguments: ["-c", "exit \(code)"], environment: [:], output: devNull))
        }
        for (code, child) in children.enumerated() {
            #expect(try child.pidfd.waitReadable(timeoutMilliseconds: 10_000))
            #expect(try child.waitExit() == .exited(Int32(code)))
            try child.pidfd.close()
        }
    }
}

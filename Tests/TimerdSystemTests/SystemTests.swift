import Glibc
import Testing
import TimerdSystem
import TimerdTestSupport

@Suite struct FileSystemTests {
    @Test func globIsSortedAndEmptyWithoutMatches() throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        for name in ["b.conf", "a.conf", "c10.conf", "c9.conf", "B.conf", "notes.txt"] {
            try writeFile("\(directory.path)/\(name)", "")
        }
        #expect(
            try FileSystem.glob(directory.path + "/*.conf")
                == ["B.conf", "a.conf", "b.conf", "c10.conf", "c9.conf"].map { "\(directory.path)/\($0)" })
        #expect(try FileSystem.glob(directory.path + "/*.nothing") == [])
        #expect(try FileSystem.glob(directory.path + "/missing/*") == [])
    }

    @Test func makeDirectoriesIsIdempotentAndRefusesFiles() throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let nested = directory.path + "/x/y/z"
        try FileSystem.makeDirectories(nested, mode: 0o700)
        try FileSystem.makeDirectories(nested, mode: 0o700)
        #expect(FileSystem.isDirectory(nested))
        #expect(try FileSystem.permissions(directory.path + "/x") == 0o700)
        try writeFile(directory.path + "/file", "")
        #expect(throws: Errno.notDirectory) { try FileSystem.makeDirectories(directory.path + "/file/sub") }
        #expect(throws: Errno.notDirectory) { try FileSystem.makeDirectories(directory.path + "/file") }
    }

    @Test func readFileExistsUnlinkAndRealPath() throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let path = directory.path + "/f"
        try writeFile(path, "content")
        #expect(try FileSystem.readFile(path) == Array("content".utf8))
        #expect(FileSystem.fileExists(path))
        #expect(FileSystem.isRegularFile(path))
        #expect(!FileSystem.isSocket(path))
        #expect(try FileSystem.realPath(directory.path + "/./f") == path)
        try FileSystem.unlink(path)
        #expect(!FileSystem.fileExists(path))
        #expect(throws: Errno.noSuchFileOrDirectory) { try FileSystem.readFile(path) }
        #expect(throws: Errno.noSuchFileOrDirectory) { try FileSystem.unlink(path) }
        #expect(try FileSystem.readFile("/proc/self/statm").isEmpty == false)
    }

    @Test(arguments: [
        ("/a/b", "/a"), ("/a", "/"), ("/", "/"), ("a", "."), ("a/b/", "a"), ("a//b", "a"), ("//a", "/"),
        ("", "."),
    ])
    func directoryName(path: String, expected: String) {
        #expect(FileSystem.directoryName(of: path) == expected)
    }
}

@Suite struct DescriptorTests {
    @Test func errnoDescriptions() {
        #expect(Errno.noSuchFileOrDirectory.description == "No such file or directory (ENOENT)")
        #expect(Errno.wouldBlock.description == "Resource temporarily unavailable (EAGAIN)")
        #expect(Errno(rawValue: 9999).description == "Unknown error 9999")
    }

    @Test func pipeNonBlockingReadAndWrite() throws {
        let pipe = try FileDescriptor.makePipe(nonBlockingRead: true)
        defer { try? pipe.read.close() }
        #expect(fcntl(pipe.read.rawValue, F_GETFD) & FD_CLOEXEC != 0)
        #expect(fcntl(pipe.write.rawValue, F_GETFD) & FD_CLOEXEC != 0)
        #expect(try pipe.read.isNonBlocking())
        #expect(try pipe.write.isNonBlocking() == false)
        #expect(try pipe.read.tryRead(upToCount: 16) == nil)

        // Fill the pipe without blocking: eventually nil.
        try pipe.write.setNonBlocking()
        let chunk = [UInt8](repeating: 7, count: 65536)
        var written = 0
        while let count = try pipe.write.tryWrite(chunk) {
            written += count
        }
        #expect(written > 0)
        try pipe.write.setNonBlocking(false)
        #expect(try pipe.write.isNonBlocking() == false)
        try pipe.write.close()

        // Drain to end of file. A concurrent test's spawn may briefly hold a copy of the write
        // end (until its child's exec), so nil can still come before end of file: poll then.
        var total = 0
        while true {
            #expect(try pipe.read.waitReadable(timeoutMilliseconds: 10_000))
            guard let bytes = try pipe.read.tryRead(upToCount: 100_000) else {
                continue
            }
            if bytes.isEmpty {
                break
            }
            total += bytes.count
        }
        #expect(total == written)
    }

    @Test func writeAfterShutdownIsEPIPEWithoutDying() throws {
        // Process-wide, and deliberately so: SIGPIPE is ignored for the whole test process from the first time
        // here on and never restored, so no test can see it change under it (every test is fine with EPIPE
        // instead of being killed, and children get default dispositions back from Spawn and Foundation).
        try Signals.ignore(.pipe)
        // Writing after our own shutdown is EPIPE (and SIGPIPE) deterministically; closing a
        // pipe's read end is not, as a concurrent spawn may briefly hold a copy of it.
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let listener = try UnixSocket.listen(path: directory.path + "/s.sock")
        defer { try? listener.close() }
        let client = try UnixSocket.connect(path: directory.path + "/s.sock")
        defer { try? client.close() }
        try UnixSocket.shutdownWrite(client)
        #expect(throws: Errno.brokenPipe) { try client.writeAll("x") }
    }

    @Test func invalidDescriptorIsEBADF() throws {
        // Never close a real descriptor twice here: tests run in parallel and the number may
        // already belong to another test.
        #expect(throws: Errno.badFileDescriptor) { try FileDescriptor(rawValue: -1).close() }
        #expect(throws: Errno.badFileDescriptor) { try FileDescriptor(rawValue: -1).read(upToCount: 1) }
    }
}

@Suite struct ProcessTests {
    @Test func identityAndEnvironment() throws {
        #expect(CurrentProcess.id == getpid())
        #expect(CurrentProcess.userID == getuid())
        #expect(try CurrentProcess.hostname().isEmpty == false)
        let environment = CurrentProcess.environment()
        #expect(environment["PATH"] == CurrentProcess.environmentVariable("PATH"))
        #expect(CurrentProcess.environmentVariable("TIMERD_SURELY_UNSET_VARIABLE") == nil)
        #expect(try CurrentProcess.residentSetBytes() > 1_000_000)
    }

    /// In timerd-test-helper, not here: the limit is the whole test process's, and lowering it (even by one)
    /// while other tests open descriptors, or a raise by another test in between, would break either.
    @Test func openFileLimitIsRaisedToTheHardLimit() throws {
        let hard = try CurrentProcess.openFileLimits().hard
        try #require(hard > 64 && hard != UInt64.max)
        // The helper lowers its soft limit to one below the hard one, then raises it twice.
        let result = try run(TestBinaries.helper(), ["file-limit"])
        #expect(result.status.isSuccess, "\(result.output)")
        #expect(result.output.split(separator: "\n") == [
            "limits \(hard - 1) \(hard)", "raised \(hard - 1) \(hard)",
            "limits \(hard) \(hard)", "raised \(hard) \(hard)",  // nothing left to raise
        ])
    }

    @Test func clocks() {
        let first = SystemClock.monotonicNow()
        let second = SystemClock.monotonicNow()
        #expect(second >= first)
        let wall = SystemClock.wallClockNow()
        #expect(wall.seconds > 1_700_000_000)
        #expect((0..<1_000_000_000).contains(wall.nanoseconds))
    }

    @Test func signalNamesAndIgnoring() throws {
        #expect(Signal.term.description == "SIGTERM")
        #expect(Signal.kill.rawValue == 9)
        #expect(Signal(rawValue: 99).description == "signal 99")

        // Ignoring and restoring happen in timerd-test-helper: a disposition is the whole process's, and
        // children the other tests start meanwhile must not see SIGUSR2 ignored. It prints its SigIgn after
        // each step; SIGUSR2 (12) is bit 11.
        let bit: UInt64 = 1 << 11
        let result = try run(TestBinaries.helper(), ["signals"])
        #expect(result.status.isSuccess, "\(result.output)")
        let masks = result.output.split(separator: "\n").compactMap { UInt64($0, radix: 16) }
        try #require(masks.count == 2, "\(result.output)")
        #expect(masks[0] & bit != 0)
        #expect(masks[1] & bit == 0)
    }

    @Test func signallingAGoneProcessGroupIsFalse() throws {
        let result = try run("/bin/true")
        #expect(result.status.isSuccess)
        // pid_max is far above this, so no such group exists.
        #expect(try ProcessControl.signalProcessGroup(Int32.max - 1, .term) == false)
        #expect(try ProcessControl.signalProcess(Int32.max - 1, .term) == false)
        #expect(throws: Errno.noSuchProcess) { try ProcessControl.openPidfd(Int32.max - 1) }
    }
}

/// The clock-change descriptor: armed, quiet while nobody sets the clock (tests never set it; the re-arm
/// path it triggers is driven by the daemon's test clock in the integration tests).
@Suite struct ClockChangeTests {
    @Test func aFreshDescriptorReportsNoChange() throws {
        let fd = try ClockChange.makeDescriptor()
        defer { try? fd.close() }
        #expect(try fd.isNonBlocking())
        #expect(try ClockChange.acknowledge(fd) == false)
        #expect(try ClockChange.acknowledge(fd) == false)
    }

    @Test func theSystemZoneIsAZone() {
        let zone = SystemTimeZones.systemZone()
        #expect(!zone.name.isEmpty)
        #expect((try? SystemTimeZones.zone(named: "Europe/Berlin"))?.name == "Europe/Berlin")
        #expect(throws: (any Error).self) { try SystemTimeZones.zone(named: "Nowhere/Atlantis") }
    }
}

import Glibc
import Testing
import TimerdSystem

@Suite struct UnixSocketTests {
    @Test func listenConnectAcceptAndPeerCredentials() throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let path = directory.path + "/run/timerd/control.sock"
        let listener = try UnixSocket.listen(path: path, mode: 0o600, directoryMode: 0o755)
        defer { try? listener.close() }
        #expect(try listener.isNonBlocking())
        #expect(fcntl(listener.rawValue, F_GETFD) & FD_CLOEXEC != 0)
        #expect(try UnixSocket.accept(listener) == nil)  // Nothing pending: nil, not an error.

        let client = try UnixSocket.connect(path: path)
        defer { try? client.close() }
        #expect(try client.isNonBlocking() == false)
        #expect(fcntl(client.rawValue, F_GETFD) & FD_CLOEXEC != 0)
        #expect(try listener.waitReadable(timeoutMilliseconds: 10_000))
        let server = try #require(try UnixSocket.accept(listener))
        defer { try? server.close() }
        #expect(try server.isNonBlocking())
        #expect(fcntl(server.rawValue, F_GETFD) & FD_CLOEXEC != 0)

        let peer = try UnixSocket.peerCredentials(server)
        #expect(peer == PeerCredentials(pid: CurrentProcess.id, uid: CurrentProcess.userID, gid: CurrentProcess.groupID))
        #expect(try UnixSocket.peerCredentials(client).pid == CurrentProcess.id)

        // Non-blocking read before data: nil. Then data, then end of file after shutdown.
        var buffer = [UInt8](repeating: 0, count: 64)
        #expect(try buffer.withUnsafeMutableBytes { try server.tryRead(into: $0) } == nil)
        try client.writeAll("PING\n")
        #expect(try server.waitReadable(timeoutMilliseconds: 10_000))
        #expect(try server.tryRead(upToCount: 64) == Array("PING\n".utf8))
        try UnixSocket.shutdownWrite(client)
        #expect(try server.waitReadable(timeoutMilliseconds: 10_000))
        #expect(try server.tryRead(upToCount: 64) == [])

        #expect(try server.tryWrite(Array("PONG\n".utf8)) == 5)
        #expect(try readLine(client) == "PONG")
    }

    @Test func socketAndDirectoryModesAreApplied() throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let path = directory.path + "/a/b/control.sock"
        let listener = try UnixSocket.listen(path: path, mode: 0o600, directoryMode: 0o750)
        defer { try? listener.close() }
        #expect(try FileSystem.permissions(path) == 0o600)
        #expect(try FileSystem.permissions(directory.path + "/a") == 0o750)
        #expect(try FileSystem.permissions(directory.path + "/a/b") == 0o750)
        #expect(FileSystem.isSocket(path))

        let shared = directory.path + "/a/shared.sock"
        let second = try UnixSocket.listen(path: shared, mode: 0o666)
        defer { try? second.close() }
        #expect(try FileSystem.permissions(shared) == 0o666)
    }

    @Test func staleSocketIsReplaced() throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let path = directory.path + "/control.sock"
        // A daemon that died without unlinking leaves the file behind. Made by bind without
        // listen: closing a listener could race with a concurrent test's spawn, whose child
        // holds a copy of every descriptor until its exec.
        let stale = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        try #require(stale >= 0)
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &address.sun_path) { $0.copyBytes(from: Array(path.utf8) + [0]) }
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(stale, $0, socklen_t(MemoryLayout<sockaddr_un>.size))
            }
        }
        #expect(bound == 0)
        Glibc.close(stale)
        #expect(FileSystem.isSocket(path))
        let connectError = #expect(throws: SocketError.self) { try UnixSocket.connect(path: path) }
        #expect(connectError?.errno == .connectionRefused)

        let listener = try UnixSocket.listen(path: path)
        defer { try? listener.close() }
        let client = try UnixSocket.connect(path: path)
        try client.close()
    }

    @Test func liveSocketIsRefused() throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let path = directory.path + "/control.sock"
        let first = try UnixSocket.listen(path: path)
        defer { try? first.close() }

        let error = #expect(throws: SocketError.self) { try UnixSocket.listen(path: path) }
        #expect(error == .alreadyListening(path: path))
        #expect(error?.description == "another timerd is listening on \(path)")

        // The first server still works, and the probe connection is only a closed client.
        let client = try UnixSocket.connect(path: path)
        defer { try? client.close() }
        var accepted: [FileDescriptor] = []
        while let connection = try UnixSocket.accept(first) {
            accepted.append(connection)
        }
        #expect(accepted.count == 2)  // The probe and the client.
        for connection in accepted {
            try connection.close()
        }
    }

    @Test func liveSocketWithFullBacklogIsStillRefused() throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let path = directory.path + "/control.sock"
        let first = try UnixSocket.listen(path: path, backlog: 0)
        defer { try? first.close() }
        var clients: [FileDescriptor] = []
        defer {
            for client in clients {
                try? client.close()
            }
        }
        // Fill the backlog with non-blocking connects until one would block.
        while clients.count < 16 {
            let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_NONBLOCK.rawValue), 0)
            try #require(fd >= 0)
            clients.append(FileDescriptor(rawValue: fd))
            var address = sockaddr_un()
            address.sun_family = sa_family_t(AF_UNIX)
            withUnsafeMutableBytes(of: &address.sun_path) { $0.copyBytes(from: Array(path.utf8) + [0]) }
            let result = withUnsafePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                    Glibc.connect(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size))
                }
            }
            if result == -1 && errno == EAGAIN {
                break
            }
        }
        let error = #expect(throws: SocketError.self) { try UnixSocket.listen(path: path) }
        #expect(error == .alreadyListening(path: path))
    }

    @Test func regularFileIsRefusedAndKept() throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let path = directory.path + "/control.sock"
        try writeFile(path, "precious")
        let error = #expect(throws: SocketError.self) { try UnixSocket.listen(path: path) }
        #expect(error == .notASocket(path: path))
        #expect(try FileSystem.readFile(path) == Array("precious".utf8))

        // A symbolic link is not a socket either, even if it points at one.
        let target = directory.path + "/real.sock"
        let listener = try UnixSocket.listen(path: target)
        defer { try? listener.close() }
        let link = directory.path + "/link.sock"
        #expect(symlink(target, link) == 0)
        #expect(throws: SocketError.notASocket(path: link)) { try UnixSocket.listen(path: link) }
        #expect(FileSystem.fileExists(link))
    }

    @Test func tooLongPathIsAClearError() throws {
        // Inside the test's own directory, so a listen that wrongly made the parent would make it there.
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let parent = directory.path + "/" + String(repeating: "x", count: 200)
        let path = parent + "/control.sock"
        let error = #expect(throws: SocketError.self) { try UnixSocket.listen(path: path) }
        #expect(error == .pathTooLong(path: path, limit: 107))
        #expect(error?.description.hasPrefix("socket path is too long (\(path.utf8.count) bytes, at most 107)") == true)
        #expect(throws: SocketError.pathTooLong(path: path, limit: 107)) { try UnixSocket.connect(path: path) }
        #expect(FileSystem.fileExists(parent) == false)

        // Exactly the limit works.
        let longest = directory.path + "/" + String(repeating: "s", count: 107 - directory.path.utf8.count - 1)
        #expect(longest.utf8.count == 107)
        let listener = try UnixSocket.listen(path: longest)
        defer { try? listener.close() }
        try UnixSocket.connect(path: longest).close()
    }

    @Test func connectToMissingSocketIsENOENT() throws {
        // In a directory of the test's own: a shared path in /tmp could exist.
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let path = directory.path + "/no-such-timerd.sock"
        let error = #expect(throws: SocketError.self) { try UnixSocket.connect(path: path) }
        #expect(error?.errno == .noSuchFileOrDirectory)
        #expect(error?.description == "connect \(path): No such file or directory (ENOENT)")
    }
}

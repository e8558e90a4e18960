import Foundation
import TimerdCluster
import TimerdSystem

/// A real etcd (Debian's etcd-server, /usr/bin/etcd) of 1 or more members on loopback ports, started for
/// the cluster scenario as Tests/IntegrationTests/EtcdCluster.swift starts the tests' one: its data and logs
/// in `directory` (under the results directory, so on the disk of the rest of the benchmark), only the
/// flags below (nothing from `ETCD_*` variables). `stop` kills the members it started, by pidfd, and
/// removes their data (the logs stay).
final class BenchEtcd {
    let directory: String
    /// One per member: `http://127.0.0.1:PORT`.
    let clientURLs: [String]
    private var members: [ChildProcess] = []

    init(binary: String, members count: Int, directory: String) throws {
        self.directory = directory
        try? FileManager.default.removeItem(atPath: directory)
        try FileSystem.makeDirectories(directory)
        let ports = try freeLoopbackPorts(2 * count)
        clientURLs = (0..<count).map { "http://127.0.0.1:\(ports[2 * $0])" }
        let peerURLs = (0..<count).map { "http://127.0.0.1:\(ports[2 * $0 + 1])" }
        let cluster = (0..<count).map { "m\($0)=\(peerURLs[$0])" }.joined(separator: ",")
        let token = "timerd-bench-\(getpid())-\(count)"
        do {
            for member in 0..<count {
                let output = try FileDescriptor.open(log(member), .writeOnly, options: [.create, .truncate])
                defer { try? output.close() }
                members.append(try Spawn.run(
                    program: binary,
                    arguments: [
                        "--name", "m\(member)", "--data-dir", "\(directory)/m\(member).data",
                        "--listen-client-urls", clientURLs[member], "--advertise-client-urls", clientURLs[member],
                        "--listen-peer-urls", peerURLs[member], "--initial-advertise-peer-urls", peerURLs[member],
                        "--initial-cluster", cluster, "--initial-cluster-token", token, "--initial-cluster-state", "new",
                    ],
                    environment: ["PATH": "/usr/local/bin:/usr/bin:/bin"], output: output))
            }
            // Ready once every member commits a write (a quorum, and each member reaches it).
            let deadline = SystemClock.monotonicNow() + 30_000_000_000
            for member in 0..<count {
                let client = try EtcdClient(endpoints: [clientURLs[member]])
                while (try? client.put("/timerd-bench-ready", Array("m\(member)".utf8))) == nil {
                    if let exited = try members[member].waitExit() {
                        throw BenchError("etcd member m\(member) exited (\(exited)) at start-up; see \(log(member))")
                    }
                    if SystemClock.monotonicNow() > deadline { throw BenchError("etcd did not accept a write within 30 s; see \(directory)/*.log") }
                    usleep(50_000)
                }
            }
        } catch {
            stop()
            throw error
        }
    }

    deinit { stop() }

    func log(_ member: Int) -> String { "\(directory)/m\(member).log" }

    var pids: [Int32] { members.map(\.pid) }

    /// SIGKILL to every member this started (their data is thrown away: a graceful stop of a 3-member etcd
    /// waits for a leader hand-over, see EtcdCluster.stopAll), then removes the data directories.
    func stop() {
        for member in members { member.killAndReap() }
        for index in members.indices { try? FileManager.default.removeItem(atPath: "\(directory)/m\(index).data") }
        members = []
    }
}

/// `count` distinct loopback TCP ports that were free a moment ago (bound to port 0, then closed).
func freeLoopbackPorts(_ count: Int) throws -> [Int] {
    var sockets: [(fd: Int32, port: Int)] = []
    defer { for socket in sockets { close(socket.fd) } }
    // All held open until every port is known, so none is handed out twice.
    while sockets.count < count { sockets.append(try boundLoopbackSocket()) }
    return sockets.map(\.port)
}

/// A close-on-exec TCP socket (non-blocking if asked) bound to 127.0.0.1 on a port the kernel picked.
func boundLoopbackSocket(nonBlocking: Bool = false) throws -> (fd: Int32, port: Int) {
    let flags = Int32(SOCK_CLOEXEC.rawValue) | (nonBlocking ? Int32(SOCK_NONBLOCK.rawValue) : 0)
    let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | flags, 0)
    guard fd >= 0 else { throw BenchError("socket: errno \(errno)") }
    var address = sockaddr_in()
    address.sin_family = sa_family_t(AF_INET)
    address.sin_addr.s_addr = in_addr_t(0x7F00_0001).bigEndian
    var length = socklen_t(MemoryLayout<sockaddr_in>.size)
    let bound = withUnsafeMutablePointer(to: &address) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
            bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) == 0 && getsockname(fd, $0, &length) == 0
        }
    }
    guard bound else {
        let error = errno
        close(fd)
        throw BenchError("bind to a loopback port: errno \(error)")
    }
    return (fd, Int(UInt16(bigEndian: address.sin_port)))
}

/// The file system `path` is on, from /proc/self/mounts: "DEVICE (TYPE)", e.g. "/dev/vda (ext4)".
func fileSystemOf(_ path: String) -> String {
    let real = (try? FileSystem.realPath(path)) ?? path
    guard let bytes = try? FileSystem.readFile("/proc/self/mounts") else { return "unknown file system" }
    var best: (point: String, text: String)?
    for line in String(decoding: bytes, as: UTF8.self).split(separator: "\n") {
        let fields = line.split(separator: " ")
        guard fields.count >= 3 else { continue }
        let point = fields[1].replacingOccurrences(of: "\\040", with: " ")
        let inside = point == "/" || real == point || real.hasPrefix(point + "/")
        if inside, point.count >= (best?.point.count ?? -1) { best = (point, "\(fields[0]) (\(fields[2]))") }
    }
    return best?.text ?? "unknown file system"
}

import Foundation
import TimerdSystem

/// Nearest-rank percentiles of a sample set, in milliseconds.
struct Summary: Codable {
    var samples: Int
    var p50: Double
    var p90: Double
    var p99: Double
    var max: Double

    init?(milliseconds values: [Double]) {
        guard !values.isEmpty else { return nil }
        let sorted = values.sorted()
        func rank(_ p: Double) -> Double { sorted[Swift.max(0, Int((p * Double(sorted.count)).rounded(.up)) - 1)] }
        samples = sorted.count
        p50 = rank(0.50)
        p90 = rank(0.90)
        p99 = rank(0.99)
        max = sorted[sorted.count - 1]
    }
}

enum Measure {
    static func now() -> UInt64 { SystemClock.monotonicNow() }

    static func seconds(since start: UInt64) -> Double { Double(now() - start) / 1e9 }

    static func sleep(seconds: Double) { usleep(UInt32(seconds * 1_000_000)) }

    /// The probe's samples (ns, one per line) as milliseconds.
    static func probeSamples(_ path: String) -> [Double] {
        guard let bytes = try? FileSystem.readFile(path) else { return [] }
        return String(decoding: bytes, as: UTF8.self).split(separator: "\n").compactMap { Double($0).map { $0 / 1e6 } }
    }

    /// The machine's load average over the last minute (/proc/loadavg), nil if unreadable: reported with
    /// every lateness result, since two cores shared with other work change every number.
    static func loadAverage() -> Double? {
        guard let bytes = try? FileSystem.readFile("/proc/loadavg") else { return nil }
        return String(decoding: bytes, as: UTF8.self).split(separator: " ").first.flatMap { Double($0) }
    }

    /// CPU time the hypervisor took from this machine's CPUs so far (`steal` of /proc/stat's first line,
    /// all CPUs), seconds; nil if unreadable. On a virtual machine, time stolen in a window stalls every
    /// scheduler in it alike.
    static func stolenSeconds() -> Double? {
        guard let bytes = try? FileSystem.readFile("/proc/stat") else { return nil }
        let first = String(decoding: bytes.prefix { $0 != UInt8(ascii: "\n") }, as: UTF8.self).split(separator: " ")
        guard first.first == "cpu", first.count > 8, let steal = Double(first[8]) else { return nil }
        return steal / Double(sysconf(Int32(_SC_CLK_TCK)))
    }

    /// Empties a file the probes append to.
    static func truncate(_ path: String) { _ = Glibc.truncate(path, 0) }

    /// The `lateness_ms` of a `fired` event line, without decoding the whole event.
    static func firedLateness(_ line: Substring) -> Double? {
        guard line.contains("\"event\":\"fired\""), let key = line.range(of: "\"lateness_ms\":") else { return nil }
        let rest = line[key.upperBound...]
        return Double(rest.prefix { $0 != "," && $0 != "}" })
    }

    static func write(_ text: String, to path: String) throws { try FileSystem.writeAtomically(path, text) }

    static func writeJSON<T: Encodable>(_ value: T, to path: String) throws {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
        try write(String(decoding: try encoder.encode(value), as: UTF8.self) + "\n", to: path)
    }
}

/// Collects the lateness of `fired` events from a `WATCH` connection on a thread of its own, filed
/// under the current `phase` (nothing is kept while it is nil). The thread ends when timerd closes the
/// stream.
final class FireWatcher: Sendable {
    let phase = LockedBox<String?>(nil)
    let samplesByPhase = LockedBox<[String: [Double]]>([:])
    let dropped = LockedBox(false)

    /// Every sample kept, whatever its phase.
    var samples: [Double] { samplesByPhase.get().values.flatMap { $0 } }

    func samples(_ phase: String) -> [Double] { samplesByPhase.get()[phase] ?? [] }

    init(socket: String, filter: String) throws {
        let ready = DispatchSemaphore(value: 0)
        let failure = LockedBox<String?>(nil)
        Thread.detachNewThread { [phase, samplesByPhase, dropped] in
            do {
                let client = try BenchClient(socket: socket)
                let reply = try client.request("WATCH \(filter)")
                guard reply.hasPrefix("OK") else { throw BenchError("WATCH: \(reply)") }
                ready.signal()
                while let line = try client.readLine() {
                    if line.contains("\"event\":\"dropped\"") { dropped.set(true) }
                    guard let current = phase.get(), let late = Measure.firedLateness(line[...]) else { continue }
                    samplesByPhase.update { $0[current, default: []].append(late) }
                }
            } catch {
                failure.set("\(error)")
                ready.signal()
            }
        }
        ready.wait()
        if let message = failure.get() { throw BenchError(message) }
    }
}

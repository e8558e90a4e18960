import Glibc
import TimerdCore

// Shared by every harness in this directory (see fuzz/README.md): compiled into each one by `make fuzz`.

/// The fuzzer's input as an array.
func fuzzInput(_ data: UnsafePointer<UInt8>, _ size: Int) -> [UInt8] {
    Array(UnsafeBufferPointer(start: data, count: size))
}

/// Stops the run with a message naming the broken property; libFuzzer saves the input as a crash.
func require(_ condition: Bool, _ message: @autoclosure () -> String) {
    if !condition { fatalError("fuzz property violated: \(message())") }
}

/// Real zones, each read from /usr/share/zoneinfo once, on first use, so no input touches the disk.
enum FuzzZones {
    /// A zone with a 30-minute DST shift: gaps and repeats that are not whole hours.
    static let lordHowe = load("Australia/Lord_Howe")
    static let berlin = load("Europe/Berlin")
    /// The TZif bytes by path, for the in-memory file systems and tz databases of the harnesses.
    static let files: [String: [UInt8]] = [
        "/usr/share/zoneinfo/Australia/Lord_Howe": lordHowe.bytes,
        "/usr/share/zoneinfo/Europe/Berlin": berlin.bytes,
    ]

    /// The zone called `name` if it is one of the loaded ones (or UTC), else nil.
    static func zone(named name: String) -> ZoneRules? {
        try? TimeZoneDatabase.zone(named: name, read: { files[$0] })
    }

    private static func load(_ name: String) -> (rules: ZoneRules, bytes: [UInt8]) {
        let path = "/usr/share/zoneinfo/" + name
        guard let file = fopen(path, "rb") else { fatalError("cannot open \(path): the harness needs tzdata") }
        defer { fclose(file) }
        var bytes: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 4096)
        while true {
            let count = fread(&chunk, 1, chunk.count, file)
            if count <= 0 { break }
            bytes += chunk[..<count]
        }
        guard let rules = try? ZoneRules(tzif: bytes, name: name) else { fatalError("cannot parse \(path)") }
        return (rules, bytes)
    }
}

/// 2026-01-01T00:00:00Z, the base time the harnesses compute fire times from.
let fuzzBaseSeconds: Int64 = 1_767_225_600

/// `JobSpec(name:options: spec.options, argv: nil) == spec`, as JobSpec documents.
func checkRebuilds(_ spec: JobSpec) {
    let options = spec.options
    do {
        let rebuilt = try JobSpec(name: spec.name, options: options, argv: nil)
        require(rebuilt == spec, "spec \(spec) rebuilds from its options \(options) as \(rebuilt)")
    } catch {
        require(false, "spec \(spec) does not rebuild from its options \(options): \(error.message)")
    }
}

import TimerdConfig
import TimerdCore

/// libFuzzer harness for the config lexer and loader, on an in-memory file system (never the disk).
///
/// The input is split at NUL bytes: the first part is the main file /etc/timerd/timerd.conf, the others
/// are /etc/timerd/jobs.d/1.conf, 2.conf, … (reached through `include`). The file system also holds
/// two real zones (Europe/Berlin, Australia/Lord_Howe) and one unreadable file. Asserts:
/// - loading gives the same outcome twice, and `parse` of the main text (when it is UTF-8) the same as
///   `load` of its path;
/// - a failed load reports at least one diagnostic, each in a file that was read or the main file;
/// - every job of a loaded config rebuilds from its canonical options to an equal `JobSpec`, and names
///   a zone the file system holds (or none).
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzConfig(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    let parts = fuzzInput(data, size).split(separator: 0, omittingEmptySubsequences: false)
    var files = FuzzZones.files
    files[mainPath] = Array(parts[0])
    for (index, part) in parts.dropFirst().enumerated() { files["/etc/timerd/jobs.d/\(index + 1).conf"] = Array(part) }
    var fileSystem = InMemoryConfigFileSystem(bytes: files, unreadable: ["/etc/timerd/jobs.d/locked.conf": "Permission denied"])
    // A few accounts, so user=, group=, socket_group and the allow-lists meet both known and unknown names.
    fileSystem.users = ["root", "alice", "bob"]
    fileSystem.groups = ["root", "ops"]

    let result = ConfigLoader.loadResult(path: mainPath, fileSystem: fileSystem)
    require(result == ConfigLoader.loadResult(path: mainPath, fileSystem: fileSystem), "loading twice differs")
    if let text = String(validating: parts[0], as: UTF8.self) {
        let parsed = Result { () throws(ConfigErrors) in try ConfigLoader.parse(text, path: mainPath, fileSystem: fileSystem) }
        require(parsed == result, "parse and load of the same main file differ")
    }
    switch result {
    case .failure(let errors):
        require(!errors.diagnostics.isEmpty, "a failed load without diagnostics")
        for diagnostic in errors.diagnostics {
            require(diagnostic.file == mainPath || files[diagnostic.file] != nil, "a diagnostic in an unknown file: \(diagnostic)")
        }
        _ = errors.timerdError
    case .success(let config):
        for job in config.jobs {
            checkRebuilds(job.spec)
            if let zone = job.spec.timezone {
                require(FuzzZones.zone(named: zone) != nil, "job \(job.spec.name) has the unknown zone \(zone)")
            }
        }
    }
    return 0
}

private let mainPath = "/etc/timerd/timerd.conf"

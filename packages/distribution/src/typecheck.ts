import path from "node:path";
import ts from "typescript";

export interface TypeCheckResult {
  /** Formatted errors, empty when there are none. */
  errors: string;
  /** How many files were checked. */
  checked: number;
}

/**
 * Compiles the project of `tsconfigPath` and emits it, reporting errors in its own files and in the
 * declaration files `checkDeclarations` selects. `tsc` with `skipLibCheck: false` would check every
 * declaration file in the program, those of third-party packages too: four times slower here, and
 * not ours to fix.
 */
export function typeCheckAndEmit(
  tsconfigPath: string,
  checkDeclarations: (fileName: string) => boolean,
): TypeCheckResult {
  const host: ts.ParseConfigFileHost = {
    ...ts.sys,
    onUnRecoverableConfigFileDiagnostic: (d) => {
      throw new Error(ts.flattenDiagnosticMessageText(d.messageText, "\n"));
    },
  };
  const config = ts.getParsedCommandLineOfConfigFile(tsconfigPath, {}, host);
  if (!config) throw new Error(`cannot read ${tsconfigPath}`);
  const program = ts.createProgram({ rootNames: config.fileNames, options: config.options });
  const files = program
    .getSourceFiles()
    .filter((f) =>
      f.isDeclarationFile ? checkDeclarations(f.fileName) : !program.isSourceFileFromExternalLibrary(f),
    );
  const diagnostics = [
    ...config.errors,
    ...program.getOptionsDiagnostics(),
    ...program.getGlobalDiagnostics(),
    ...files.flatMap((f) => [...program.getSyntacticDiagnostics(f), ...program.getSemanticDiagnostics(f)]),
    // One file at a time: emit() without a file type-checks the whole program first.
    ...files.filter((f) => !f.isDeclarationFile).flatMap((f) => program.emit(f).diagnostics),
  ];
  const cwd = path.dirname(tsconfigPath);
  const errors = ts.formatDiagnostics(diagnostics, {
    getCanonicalFileName: (f) => f,
    getCurrentDirectory: () => cwd,
    getNewLine: () => "\n",
  });
  return { errors, checked: files.length };
}

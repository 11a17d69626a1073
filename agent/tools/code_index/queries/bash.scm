; Outline patterns for Bash: `function f { ... }` and `f() { ... }` are both function_definition.

(function_definition name: (word) @name) @definition.function

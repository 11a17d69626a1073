; Outline patterns for JavaScript (and JSX). Captures: @definition.<kind> spans the definition,
; @name is its name. Earlier patterns win when two match the same name.

(function_declaration name: (identifier) @name) @definition.function

(generator_function_declaration name: (identifier) @name) @definition.function

; `const f = () => ...`, `let g = function () {...}`, `var h = async function* () {...}`
(lexical_declaration
  (variable_declarator
    name: (identifier) @name
    value: [(arrow_function) (function_expression) (generator_function)])) @definition.function

(variable_declaration
  (variable_declarator
    name: (identifier) @name
    value: [(arrow_function) (function_expression) (generator_function)])) @definition.function

(class_declaration name: (identifier) @name) @definition.class

(lexical_declaration
  (variable_declarator name: (identifier) @name value: (class))) @definition.class

(class_body (method_definition name: (_) @name) @definition.method)

; Class fields holding functions: `onClick = () => {...}`
(class_body
  (field_definition
    property: (property_identifier) @name
    value: [(arrow_function) (function_expression)]) @definition.method)

; Top-level (possibly exported) `const UPPER_CASE = ...` are constants by convention.
(program
  (lexical_declaration kind: "const"
    (variable_declarator name: (identifier) @name)) @definition.constant
  (#match? @name "^[A-Z][A-Z0-9_]*$"))

(program
  (export_statement
    declaration: (lexical_declaration kind: "const"
      (variable_declarator name: (identifier) @name)) @definition.constant)
  (#match? @name "^[A-Z][A-Z0-9_]*$"))

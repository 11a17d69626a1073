; Outline patterns for TypeScript; TSX's grammar extends TypeScript's, so TSX uses them too.
; Captures: @definition.<kind> spans the definition, @name is its name. Earlier patterns win
; when two match the same name.

(function_declaration name: (identifier) @name) @definition.function

(generator_function_declaration name: (identifier) @name) @definition.function

; Overloads and `declare function`.
(function_signature name: (identifier) @name) @definition.function

; `const f = () => ...`, `let g = function () {...}`, `var h = async function* () {...}`
(lexical_declaration
  (variable_declarator
    name: (identifier) @name
    value: [(arrow_function) (function_expression) (generator_function)])) @definition.function

(variable_declaration
  (variable_declarator
    name: (identifier) @name
    value: [(arrow_function) (function_expression) (generator_function)])) @definition.function

(class_declaration name: (type_identifier) @name) @definition.class

(abstract_class_declaration name: (type_identifier) @name) @definition.class

(lexical_declaration
  (variable_declarator name: (identifier) @name value: (class))) @definition.class

(class_body (method_definition name: (_) @name) @definition.method)

(class_body (abstract_method_signature name: (_) @name) @definition.method)

; Class fields holding functions: `onClick = () => {...}`
(class_body
  (public_field_definition
    name: (_) @name
    value: [(arrow_function) (function_expression)]) @definition.method)

(interface_declaration name: (type_identifier) @name) @definition.interface

(interface_body (method_signature name: (_) @name) @definition.method)

(type_alias_declaration name: (type_identifier) @name) @definition.type

(enum_declaration name: (identifier) @name) @definition.enum

; `namespace N {}` and `declare module "m" {}`
(internal_module name: (_) @name) @definition.module

(module name: [(identifier) @name (string (string_fragment) @name)]) @definition.module

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

; Outline patterns for C. Captures: @definition.<kind> spans the definition, @name is its name.
; Only definitions: prototypes and forward declarations (no body) are left out.

(function_definition
  declarator: [
    (function_declarator declarator: (identifier) @name)
    (pointer_declarator declarator: (function_declarator declarator: (identifier) @name))
    (pointer_declarator
      declarator: (pointer_declarator
        declarator: (function_declarator declarator: (identifier) @name)))
  ]) @definition.function

(struct_specifier name: (type_identifier) @name body: (field_declaration_list)) @definition.struct

(union_specifier name: (type_identifier) @name body: (field_declaration_list)) @definition.struct

(enum_specifier name: (type_identifier) @name body: (enumerator_list)) @definition.enum

(type_definition declarator: (type_identifier) @name) @definition.type

; `typedef int (*callback)(int);`
(type_definition
  declarator: (function_declarator
    declarator: (parenthesized_declarator
      (pointer_declarator declarator: (type_identifier) @name)))) @definition.type

; Object-like macros with a value; include guards have none.
(preproc_def name: (identifier) @name value: (_)) @definition.constant
